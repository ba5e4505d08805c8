package hostfs

import (
	"context"
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/engine/isolate"
)

func TestRootsSeenAndHost(t *testing.T) {
	tests := []struct {
		name  string
		roots Roots
		host  Path
		seen  string
	}{
		{"no root", Roots{}, "/var/lib/kubelet", "/var/lib/kubelet"},
		{"slash root", Roots{Root: "/"}, "/etc", "/etc"},
		{"root", Roots{Root: "/host", Proc: "/host/proc", Sys: "/host/sys"}, "/var/lib/kubelet", "/host/var/lib/kubelet"},
		{"root itself", Roots{Root: "/host/"}, "/", "/host"},
		{"proc root apart", Roots{Root: "/host", Proc: "/hostproc"}, "/proc/1/mountinfo", "/hostproc/1/mountinfo"},
		{"sys root apart", Roots{Root: "/host", Sys: "/hostsys"}, "/sys/fs/cgroup", "/hostsys/fs/cgroup"},
		{"not proc", Roots{Root: "/host", Proc: "/hostproc"}, "/procfoo", "/host/procfoo"},
		{"unclean", Roots{Root: "/host"}, "/etc/../var//log/", "/host/var/log"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.roots.Seen(tc.host); got != tc.seen {
				t.Errorf("Seen(%s) = %s, want %s", tc.host, got, tc.seen)
			}
			back, ok := tc.roots.Host(tc.seen)
			if want := Clean(string(tc.host)); !ok || back != want {
				t.Errorf("Host(%s) = %s, %v, want %s", tc.seen, back, ok, want)
			}
		})
	}
	if p, ok := (Roots{Root: "/host"}).Host("/elsewhere/x"); ok {
		t.Errorf("a path outside the root has a host form: %s", p)
	}
}

func TestPathUnderAndUserData(t *testing.T) {
	if !Path("/a/b").Under("/a") || Path("/ab").Under("/a") || !Path("/a").Under("/a") || !Path("/x").Under("/") {
		t.Error("Under is wrong")
	}
	for p, want := range map[Path]bool{
		"/etc/kubernetes": true, "/proc/1/mountinfo": false, "/proc/12/root/etc": true,
		"/proc/12/cwd": true, "/sys/fs/cgroup": false, "/proc": false,
	} {
		if got := userData(p); got != want {
			t.Errorf("userData(%s) = %v, want %v", p, got, want)
		}
	}
}

func TestParseDirents(t *testing.T) {
	rec := func(name string, typ uint8) []byte {
		n := 19 + len(name) + 1
		n = (n + 7) &^ 7
		b := make([]byte, n)
		binary.NativeEndian.PutUint64(b[0:], 42)
		binary.NativeEndian.PutUint16(b[16:], uint16(n))
		b[18] = typ
		copy(b[19:], name)
		return b
	}
	tests := []struct {
		name string
		in   []byte
		want []Dirent
	}{
		{"empty", nil, nil},
		{"two", append(rec("a", 4), rec("file.json", 8)...), []Dirent{{"a", 4}, {"file.json", 8}}},
		{"cut short", append(rec("a", 4), rec("b", 8)[:10]...), []Dirent{{"a", 4}}},
		{"reclen too small", func() []byte { b := rec("a", 4); b[16], b[17] = 3, 0; return b }(), nil},
		{"reclen past end", func() []byte { b := rec("a", 4); b[16], b[17] = 255, 0; return b }(), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ParseDirents(tc.in)
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("entry %d: %v, want %v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

func FuzzParseDirents(f *testing.F) {
	f.Add([]byte{})
	f.Add(make([]byte, 24))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, d := range ParseDirents(b) {
			if len(d.Name) > len(b) {
				t.Fatalf("name longer than the input: %q", d.Name)
			}
		}
	})
}

func TestListDirKeepsTypesAndSorts(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"b", "a"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "c"), 0o700); err != nil {
		t.Fatal(err)
	}
	l, err := ListDir(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Entries) != 3 || l.Entries[0].Name != "a" || l.Entries[1].Name != "b" || !l.Entries[2].IsDir() || l.Truncated {
		t.Errorf("listing %+v", l)
	}
	if l, err := ListDir(dir, 2); err != nil || len(l.Entries) != 2 || !l.Truncated {
		t.Errorf("capped listing %+v, %v", l, err)
	}
	if _, err := ListDir(filepath.Join(dir, "none"), 0); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing directory: %v, want fs.ErrNotExist", err)
	}
}

// fakeRun answers ops as a worker would, in process, and hangs on paths
// it is told to.
type fakeRun struct {
	hang  map[string]bool
	calls []string
}

func (r *fakeRun) run(_ context.Context, _ time.Duration, op, target string, req, resp any) error {
	r.calls = append(r.calls, op+" "+target)
	if r.hang[target] {
		return &isolate.HungError{Op: op, Timeout: time.Second, Evidence: &layout.HangEvidence{}}
	}
	if op == isolate.OpReadFile {
		rq := req.(isolate.ReadFileRequest)
		if target == "/proc/1/mountinfo" {
			*(resp.(*isolate.ReadFileResult)) = isolate.ReadFileResult{Data: []byte(
				"1 0 8:1 / / rw - ext4 /dev/sda1 rw\n" +
					"2 1 0:50 / /mnt/nfs rw - nfs4 srv:/x rw\n" +
					"3 1 8:2 / /mnt/disk rw - ext4 /dev/sdb rw\n")}
			return nil
		}
		r, err := isolate.ReadFileLimited(rq.Path, rq.Max)
		if err != nil {
			return err
		}
		*(resp.(*isolate.ReadFileResult)) = r
	}
	return nil
}

func TestFSHungPolicy(t *testing.T) {
	fr := &fakeRun{hang: map[string]bool{"/mnt/nfs/a": true, "/mnt/disk/a": true}}
	var reported []Path
	f := New(Config{Roots: Roots{Root: "/"}, Hung: []string{"/var/lib/kubelet/pods/x/volumes/"}, Run: fr.run, KnowsHung: true,
		OnHungMount: func(seen string, _ *layout.HangEvidence) { reported = append(reported, Path(seen)) }})

	// A path under a mount hung earlier is not touched.
	if _, err := f.Read(context.Background(), "/var/lib/kubelet/pods/x/volumes/v/f", 10); !errors.Is(err, ErrHung) {
		t.Errorf("read under a hung mount: %v, want ErrHung", err)
	}
	if len(fr.calls) != 0 {
		t.Errorf("ops ran for a hung path: %v", fr.calls)
	}
	// A hang on a network mount reports that mount once, and the path
	// and everything below it is skipped afterwards.
	var he *isolate.HungError
	if _, err := f.Stat(context.Background(), "/mnt/nfs/a"); !errors.As(err, &he) {
		t.Fatalf("stat of a hanging path: %v", err)
	}
	if len(reported) != 1 || reported[0] != "/mnt/nfs" || !f.IsHung("/mnt/nfs/b") {
		t.Errorf("reported %v; /mnt/nfs/b hung: %v", reported, f.IsHung("/mnt/nfs/b"))
	}
	// A hang on a local disk condemns the path, not the mount.
	_, _ = f.Stat(context.Background(), "/mnt/disk/a")
	if len(reported) != 1 || f.IsHung("/mnt/disk/b") || !f.IsHung("/mnt/disk/a/below") {
		t.Errorf("local hang: reported %v; /mnt/disk/b hung %v", reported, f.IsHung("/mnt/disk/b"))
	}
	if got := f.HungHere(); len(got) != 2 || got[0] != "/mnt/disk/a" || got[1] != "/mnt/nfs/a" {
		t.Errorf("HungHere = %v", got)
	}
	// Missing files answer fs.ErrNotExist through the worker's errno.
	dir := t.TempDir()
	if _, err := f.Read(context.Background(), Path(dir).Join("none"), 10); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func TestFSUndeclaredHungCheckFails(t *testing.T) {
	f := New(Config{Run: (&fakeRun{}).run, Collector: "example"})
	defer func() {
		if recover() == nil {
			t.Error("checking the hung set without declaring the need did not fail")
		}
	}()
	f.IsHung("/var/lib/kubelet")
}

func TestFSProcPathsNeedNoDeclaration(t *testing.T) {
	f := New(Config{Run: (&fakeRun{}).run, Collector: "example"})
	if f.IsHung("/proc/1/stat") {
		t.Error("a /proc path is hung")
	}
}

// A hung mount outside --root (one of nodesnap's own) is still reported,
// by the path nodesnap reached it at; one under --root by its host form.
func TestReportHungSeen(t *testing.T) {
	var got []string
	f := New(Config{Roots: Roots{Root: "/host"}, Run: (&fakeRun{}).run, KnowsHung: true,
		OnHungMount: func(seen string, _ *layout.HangEvidence) { got = append(got, seen) }})
	f.ReportHungSeen("/mnt/own", nil)
	f.ReportHungSeen("/host/var/lib/kubelet/pods/x", nil)
	if len(got) != 2 || got[0] != "/mnt/own" || got[1] != "/host/var/lib/kubelet/pods/x" {
		t.Errorf("reported %v", got)
	}
	if !f.IsHung("/var/lib/kubelet/pods/x/volumes") {
		t.Error("the mount under --root is not in the hung set")
	}
}
