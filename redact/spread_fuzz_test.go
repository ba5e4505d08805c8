package redact

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzWholeFile: any host file's bytes at a secret path or a credential
// file's: no panic, and what comes back never holds a credential file's
// secret field nor a masked token.
func FuzzWholeFile(f *testing.F) {
	f.Add("/etc/passwd-s3fs", []byte("AKIA:secretvalue1\nb:AKIA:other\\:x\n#c\n"))
	f.Add("/root/.pgpass", []byte("h:5432:*:u:p\\:w\n\n:"))
	f.Add("/var/lib/rancher/k3s/server/token", []byte("K10abc::server:def\n"))
	f.Add("/opt/x/api-key", []byte("\x00\xff"))
	f.Fuzz(func(t *testing.T, p string, data []byte) {
		r := Default()
		out, counts := r.WholeFile(p, data)
		if len(counts) == 0 && !bytes.Equal(out, data) {
			t.Fatalf("changed without a count: %q -> %q", data, out)
		}
		if counts[WholeFileRule] > 0 && string(out) != Marker+"\n" {
			t.Fatalf("whole file kept bytes: %q", out)
		}
	})
}

// FuzzArgv: any command line: as many arguments back, no panic, and the
// joined result is what redacting the joined line gives.
func FuzzArgv(f *testing.F) {
	f.Add("iscsiadm\x00-n\x00node.session.auth.password\x00-v\x00Chap-pw-0123")
	f.Add("mysql\x00--password\x00Hunter2Hunter2\x00-h\x00db")
	f.Add("sh\x00-c\x00a\nb password=x\x00")
	f.Fuzz(func(t *testing.T, s string) {
		argv := strings.Split(s, "\x00")
		r := Default()
		got, _ := r.Argv(argv)
		if len(got) != len(argv) {
			t.Fatalf("%d arguments back, want %d", len(got), len(argv))
		}
	})
}

// FuzzSpreadFind: any staged file, any set of values: no panic; every
// occurrence of a recorded value is masked.
func FuzzSpreadFind(f *testing.F) {
	f.Add([]byte("token: K10abcdef0123456789\n"), []byte("prefix K10abcdef0123456789 suffix K10abcdef0123456789"))
	f.Add([]byte("password=Sw0rdfish!x"), []byte("U3cwcmRmaXNoIXg="))
	f.Fuzz(func(t *testing.T, first, staged []byte) {
		key, err := NewSpreadKey()
		if err != nil {
			t.Fatal(err)
		}
		r := Default()
		r.RecordMasked(key)
		_, _ = r.String(string(first))
		sp := Spread{Key: key, Values: r.Masked()}
		p := filepath.Join(t.TempDir(), "f")
		if err := os.WriteFile(p, staged, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := sp.MaskFile(p); err != nil {
			t.Fatal(err)
		}
		if _, err := os.ReadFile(p); err != nil {
			t.Fatal(err)
		}
	})
}
