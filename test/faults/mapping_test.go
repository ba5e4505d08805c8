package faults

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/bundle/naming"
	"github.com/nodesnap/nodesnap/engine/outputdir"
	"github.com/nodesnap/nodesnap/test/testkit"
)

// setSysctl sets a /proc/sys file for the test and restores it after.
func setSysctl(t *testing.T, name, value string) {
	t.Helper()
	p := "/proc/sys/" + strings.ReplaceAll(name, ".", "/")
	old, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("reading %s: %v", name, err)
	}
	if err := os.WriteFile(p, []byte(value), 0o644); err != nil {
		t.Fatalf("setting %s: %v", name, err)
	}
	t.Cleanup(func() { os.WriteFile(p, old, 0o644) })
}

// --obfuscate in a world-writable, sticky output directory (like /var/tmp)
// where another user (uid 65534) has planted, for every bundle name of the
// coming minute, a symlink to a root-owned file and a regular file of
// their own at the mapping's names (the final one and the old temporary
// one), with the kernel's protected_symlinks and protected_regular off.
// Root must write through none of them: the victim is unchanged, the
// planted files stay empty, and the mapping is a new regular file, 0600,
// owned by root, with one link. It used to overwrite the victim and hand
// the token→value mapping to the planting user.
func TestObfuscationMappingAgainstPlants(t *testing.T) {
	testkit.RequireRoot(t)
	setSysctl(t, "fs.protected_symlinks", "0")
	setSysctl(t, "fs.protected_regular", "0")
	for i := 0; i < rounds(1, 3); i++ {
		n := newNode(t)
		out := t.TempDir()
		for d := out; d != "/" && d != "."; d = parent(d) {
			if st, err := os.Stat(d); err == nil && st.Mode().Perm()&0o001 == 0 {
				os.Chmod(d, st.Mode().Perm()|0o001)
			}
		}
		if err := os.Chmod(out, 0o777|os.ModeSticky); err != nil {
			t.Fatal(err)
		}
		victim := filepath.Join(t.TempDir(), "victim")
		if err := os.WriteFile(victim, []byte("root's file\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		host, _ := os.Hostname()
		var script strings.Builder
		var plantedFiles []string
		now := time.Now()
		for s := -2; s < 60; s++ {
			for _, h := range []string{host, "reliability-node"} {
				base := strings.TrimSuffix(filepath.Join(out, naming.Name{Host: h, Time: now.Add(time.Duration(s) * time.Second)}.String()), ".tar.gz")
				final, tmp := base+outputdir.MappingSuffix, base+outputdir.MappingSuffix+".tmp"
				fmt.Fprintf(&script, "ln -s %s %s\n", victim, final)
				if s%2 == 0 {
					fmt.Fprintf(&script, "ln -s %s %s\n", victim, tmp)
				} else {
					fmt.Fprintf(&script, ": > %s && chmod 666 %s\n", tmp, tmp)
					plantedFiles = append(plantedFiles, tmp)
				}
			}
		}
		plant := exec.Command("/bin/sh", "-ec", script.String())
		plant.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		if b, err := plant.CombinedOutput(); err != nil {
			t.Fatalf("planting as uid 65534: %v\n%s", err, b)
		}
		conf := filepath.Join(n.root, "etc/peer.conf")
		if err := os.WriteFile(conf, []byte("peer_address = 10.20.30.40\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		r := nodesnap(t, runTimeout+30*time.Second, nil, n.args(out, "--obfuscate", "ip", "--only", "host,nodeconfig", "--config-file", "/etc/peer.conf")...)
		o := outcome{fault: "--obfuscate with links and files planted by another user"}
		if r.code != 0 && r.code != 3 {
			t.Errorf("exit %d\n%s", r.code, r.stderr)
		}
		if b, _ := os.ReadFile(victim); string(b) != "root's file\n" {
			t.Errorf("root wrote through a planted link: the victim holds %q", b)
		}
		for _, p := range plantedFiles {
			if st, err := os.Lstat(p); err != nil || st.Size() != 0 {
				t.Errorf("a file planted by another user was written: %s (%v)", p, err)
			}
		}
		// The mapping is the one regular file with the mapping suffix.
		var mapping string
		ents, _ := os.ReadDir(out)
		for _, e := range ents {
			if e.Type().IsRegular() && strings.HasSuffix(e.Name(), outputdir.MappingSuffix) {
				if mapping != "" {
					t.Errorf("two mapping files: %s and %s", mapping, e.Name())
				}
				mapping = filepath.Join(out, e.Name())
			}
			if strings.HasPrefix(e.Name(), ".nodesnap-") {
				t.Errorf("left behind: %s", e.Name())
			}
		}
		if mapping == "" {
			t.Fatalf("no mapping file written; stderr:\n%s", r.stderr)
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(mapping, &st); err != nil {
			t.Fatal(err)
		}
		if st.Mode&syscall.S_IFMT != syscall.S_IFREG || st.Mode&0o7777 != 0o600 || st.Uid != 0 || st.Nlink != 1 {
			t.Errorf("mapping %s: mode %o, uid %d, %d links: want a regular file, 0600, root's, one link", mapping, st.Mode, st.Uid, st.Nlink)
		}
		o.valid = r.code == 0 || r.code == 3
		o.failed = t.Failed()
		record(o)
	}
}
