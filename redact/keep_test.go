package redact

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoOverRedaction: testdata/keep holds what diagnosis reads (mountinfo,
// goroutine dumps, kubelet and kernel logs, /proc stacks, lsblk, CSI
// vol_data.json, kubelet config, pod specs that name secrets, metrics,
// command lines with secret *file* flags, versions, digests, timestamps,
// device numbers, UUIDs). None of it is secret; all of it must come out
// byte-identical, with obfuscation on too (the files hold only addresses
// that identify nothing, and version numbers that look like addresses).
func TestNoOverRedaction(t *testing.T) {
	obf, err := Build(nil, Options{
		Obfuscate: []string{"ip", "hostname", "mac", "user"},
		Key:       bytes.Repeat([]byte{7}, 32),
		Hostnames: []string{"node-b17.corp.example", "node-b17"},
		Users:     []string{"alice"},
	})
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("testdata/keep/*.txt")
	if err != nil || len(files) < 5 {
		t.Fatalf("keep files: %v %v", files, err)
	}
	for _, f := range files {
		in, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for name, r := range map[string]*Redactor{"default": Default(), "obfuscating": obf} {
			var out bytes.Buffer
			w := r.NewWriter(&out)
			if _, err := w.Write(in); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if c := w.Counts(); len(c) != 0 {
				t.Errorf("%s (%s): counted %v", f, name, c)
			}
			if !bytes.Equal(out.Bytes(), in) {
				inL, outL := strings.Split(string(in), "\n"), strings.Split(out.String(), "\n")
				for i := range inL {
					if i >= len(outL) || inL[i] != outL[i] {
						got := "<missing>"
						if i < len(outL) {
							got = outL[i]
						}
						t.Errorf("%s (%s) line %d changed:\n  in: %s\n out: %s", f, name, i+1, inL[i], got)
						break
					}
				}
			}
		}
	}
}
