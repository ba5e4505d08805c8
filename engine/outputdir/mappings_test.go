package outputdir

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Whatever is already at the mapping's name — a link to a file that must
// not be written, a dangling link, someone's regular file — is neither
// followed nor written: the mapping gets the next free name, as a new
// regular file, mode 0600, of this user, with one link.
func TestWriteMappingsNeverThroughWhatIsThere(t *testing.T) {
	// Each plants something and returns its path ("" for nothing).
	cases := map[string]func(t *testing.T, at, victim string) string{
		"nothing there": func(*testing.T, string, string) string { return "" },
		"symlink to a file": func(t *testing.T, at, victim string) string {
			must(t, os.Symlink(victim, at))
			return at
		},
		"dangling symlink": func(t *testing.T, at, victim string) string {
			must(t, os.Symlink(victim+".new", at))
			return at
		},
		"regular file": func(t *testing.T, at, _ string) string {
			must(t, os.WriteFile(at, nil, 0o666))
			return at
		},
		"the old temporary name is a symlink": func(t *testing.T, at, victim string) string {
			must(t, os.Symlink(victim, at+".tmp"))
			return at + ".tmp"
		},
	}
	for name, plant := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			victim := filepath.Join(t.TempDir(), "victim")
			must(t, os.WriteFile(victim, []byte("precious\n"), 0o644))
			b := filepath.Join(dir, "nodesnap-h-20261121T101500Z.tar.gz")
			planted := plant(t, filepath.Join(dir, "nodesnap-h-20261121T101500Z"+MappingSuffix), victim)

			p, err := WriteMappings(b, map[string]string{"ip-0001": "10.1.2.3"})
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := os.ReadFile(victim); string(got) != "precious\n" {
				t.Errorf("the link's target was written: %q", got)
			}
			if _, err := os.Stat(victim + ".new"); err == nil {
				t.Errorf("the dangling link's target was created")
			}
			var st syscall.Stat_t
			must(t, syscall.Lstat(p, &st))
			if st.Mode&syscall.S_IFMT != syscall.S_IFREG || st.Mode&0o777 != 0o600 || int(st.Uid) != os.Geteuid() || st.Nlink != 1 {
				t.Errorf("mapping %s: mode %o uid %d links %d, want a regular 0600 file of uid %d with one link", p, st.Mode, st.Uid, st.Nlink, os.Geteuid())
			}
			if planted != "" {
				if p == planted {
					t.Errorf("the mapping took the name of what was planted")
				}
				if fi, err := os.Lstat(planted); err != nil || fi.Mode().IsRegular() && fi.Size() != 0 {
					t.Errorf("what was planted changed: %v %v", fi, err)
				}
			}
			var m Mapping
			raw, _ := os.ReadFile(p)
			if err := json.Unmarshal(raw, &m); err != nil || len(m.Tokens) != 1 || m.Tokens[0].Value != "10.1.2.3" {
				t.Errorf("mapping content %s (%v)", raw, err)
			}
			for _, n := range list(t, dir) {
				if strings.HasPrefix(n, ".nodesnap-") {
					t.Errorf("temporary file left: %s", n)
				}
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func list(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}
