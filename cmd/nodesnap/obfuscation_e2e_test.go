package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/engine/outputdir"
)

// With --obfuscate, one IP seen by two collectors (separate processes) gets
// the same token in both; the token→value mapping is written beside the
// bundle, mode 0600, and nothing of it is inside.
func TestCollectObfuscatesConsistently(t *testing.T) {
	const ip = "10.20.30.40"
	conf := filepath.Join(t.TempDir(), "peer.conf")
	if err := os.WriteFile(conf, []byte("peer_address = "+ip+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	holder := exec.Command("/bin/sh", "-c", "sleep 300; :", "obf-holder", "--peer="+ip)
	holder.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-holder.Process.Pid, syscall.SIGKILL); holder.Wait() })

	out := t.TempDir()
	r := runNodesnap(t, 90*time.Second, nil, "collect", "--output-dir", out, "--only", "processes,nodeconfig",
		"--config-file", conf, "--obfuscate", "ip", "--timeout", "60s")
	if r.code != exitOK && r.code != exitPartial {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	var bundlePathFound, mapping string
	for _, n := range bundleFiles(t, out) {
		switch {
		case strings.HasSuffix(n, ".tar.gz"):
			bundlePathFound = filepath.Join(out, n)
		case strings.HasSuffix(n, outputdir.MappingSuffix):
			mapping = filepath.Join(out, n)
		default:
			t.Errorf("unexpected file in the output directory: %s", n)
		}
	}
	if bundlePathFound == "" || mapping == "" {
		t.Fatalf("want a bundle and a mapping beside it, have %v", readDir(t, out))
	}
	if st, err := os.Stat(mapping); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("mapping file mode: %v %v, want 0600", st, err)
	}
	if !strings.Contains(r.stderr, mapping) {
		t.Errorf("nodesnap did not say where the mapping is:\n%s", r.stderr)
	}
	c := mustValidate(t, bundlePathFound)
	token := regexp.MustCompile(`ip-[0-9a-f]{12}`)
	var ps, cf []byte
	for name, b := range c.Files {
		if bytes.Contains(b, []byte(ip)) {
			t.Errorf("%s still holds %s", name, ip)
		}
		if strings.HasSuffix(name, ".obfuscation.json") || bytes.Contains(b, []byte(`"tokens"`)) {
			t.Errorf("the mapping is inside the bundle: %s", name)
		}
		switch {
		case name == "processes/ps.txt":
			ps = b
		case strings.HasSuffix(name, "peer.conf"):
			cf = b
		}
	}
	psTok := token.Find(lineWith(ps, "obf-holder"))
	cfTok := token.Find(cf)
	if psTok == nil || cfTok == nil || !bytes.Equal(psTok, cfTok) {
		t.Fatalf("tokens differ across collectors: processes %q, nodeconfig %q", psTok, cfTok)
	}
	var m outputdir.Mapping
	raw, err := os.ReadFile(mapping)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range m.Tokens {
		if e.Token == string(psTok) && e.Value == ip {
			found = true
		}
	}
	if !found {
		t.Errorf("mapping %s lacks %s -> %s", raw, psTok, ip)
	}
	if got := c.Manifest.Redaction.Obfuscated; len(got) != 1 || got[0] != "ip" {
		t.Errorf("manifest obfuscated %v, want [ip]", got)
	}
}

func lineWith(b []byte, s string) []byte {
	for _, l := range bytes.Split(b, []byte("\n")) {
		if bytes.Contains(l, []byte(s)) {
			return l
		}
	}
	return nil
}
