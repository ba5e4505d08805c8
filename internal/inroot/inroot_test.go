package inroot

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// tree builds a root holding hostile and honest links.
func tree(t *testing.T) (root, outside string) {
	t.Helper()
	base := t.TempDir()
	root = filepath.Join(base, "root")
	outside = filepath.Join(base, "outside")
	for _, d := range []string{root + "/etc", root + "/var/lib/kubelet/pki", root + "/run", outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(root+"/etc/shadow", "inside shadow")
	write(outside+"/secret", "outside secret")
	write(root+"/var/lib/kubelet/pki/kubelet-client-2024.pem", "the right pem")
	links := map[string]string{
		"/var/lib/kubelet/config.yaml":                    "/etc/shadow",
		"/var/lib/kubelet/pki/kubelet-client-current.pem": "/var/lib/kubelet/pki/kubelet-client-2024.pem",
		"/var/lib/kubelet/dotdot":                         "../../../../../../../../" + strings.TrimPrefix(outside, "/") + "/secret",
		"/var/lib/kubelet/abs-out":                        outside + "/secret",
		"/var/lib/kubelet/environ":                        "/proc/self/environ",
		"/var/lib/kubelet/loop":                           "/var/lib/kubelet/loop",
		"/var/lib/kubelet/dirlink":                        "/etc",
		"/etc/resolv.conf":                                "../run/resolv.conf",
	}
	for from, to := range links {
		if err := os.Symlink(to, root+from); err != nil {
			t.Fatal(err)
		}
	}
	write(root+"/run/resolv.conf", "nameserver 10.0.0.10")
	return root, outside
}

func read(t *testing.T, root, rel string) (string, error) {
	t.Helper()
	fd, err := Open(root, rel, unix.O_RDONLY)
	if err != nil {
		return "", err
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	b, err := io.ReadAll(f)
	return string(b), err
}

func TestOpenStaysInRoot(t *testing.T) {
	for _, walkOnly := range []bool{false, true} {
		name := "openat2"
		if walkOnly {
			name = "walk"
		}
		t.Run(name, func(t *testing.T) {
			forceWalk(walkOnly)
			defer forceWalk(false)
			root, _ := tree(t)
			cases := []struct {
				rel, want string
				err       error
			}{
				{"/var/lib/kubelet/config.yaml", "inside shadow", nil},
				{"/var/lib/kubelet/pki/kubelet-client-current.pem", "the right pem", nil},
				{"/var/lib/kubelet/dirlink/shadow", "inside shadow", nil},
				{"/etc/resolv.conf", "nameserver 10.0.0.10", nil},
				{"/var/lib/kubelet/dotdot", "", unix.ENOENT},
				{"/var/lib/kubelet/abs-out", "", unix.ENOENT},
				{"/var/lib/kubelet/environ", "", unix.ENOENT},
				{"/var/lib/kubelet/loop", "", unix.ELOOP},
				{"/../../etc/shadow", "inside shadow", nil},
			}
			for _, c := range cases {
				got, err := read(t, root, c.rel)
				if c.err != nil {
					if !errors.Is(err, c.err) {
						t.Errorf("%s: got %q, %v; want error %v", c.rel, got, err, c.err)
					}
					continue
				}
				if err != nil || got != c.want {
					t.Errorf("%s: got %q, %v; want %q", c.rel, got, err, c.want)
				}
			}
			// O_PATH|O_NOFOLLOW opens the link itself.
			l, err := Readlink(root, "/var/lib/kubelet/config.yaml")
			if err != nil || l != "/etc/shadow" {
				t.Errorf("readlink: %q, %v", l, err)
			}
		})
	}
}

// TestBoundaryRefusesProc: under the host's own "/", a user's link into
// /proc is refused, and /proc paths themselves still read.
func TestBoundaryRefusesProc(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "environ")
	if err := os.Symlink("/proc/self/environ", link); err != nil {
		t.Fatal(err)
	}
	b := Boundary{}
	if fd, err := b.Open(link, unix.O_RDONLY); err == nil {
		unix.Close(fd)
		t.Fatalf("a link into /proc opened")
	} else if !strings.Contains(err.Error(), "/proc") {
		t.Errorf("error does not say why: %v", err)
	}
	fd, err := b.Open("/proc/self/status", unix.O_RDONLY)
	if err != nil {
		t.Fatalf("/proc/self/status: %v", err)
	}
	unix.Close(fd)
	// /proc/<pid>/root/x resolves inside that process's root.
	fd, err = b.Open("/proc/self/root"+link, unix.O_PATH|unix.O_NOFOLLOW)
	if err != nil {
		t.Fatalf("through /proc/self/root: %v", err)
	}
	unix.Close(fd)
}

func TestBoundaryRoot(t *testing.T) {
	root, _ := tree(t)
	b := Boundary{Root: root}
	f, err := b.File(root+"/var/lib/kubelet/config.yaml", unix.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(f)
	f.Close()
	if string(got) != "inside shadow" {
		t.Errorf("got %q", got)
	}
	if _, err := b.File(root+"/var/lib/kubelet/environ", unix.O_RDONLY); err == nil {
		t.Errorf("environ link opened")
	}
}

func TestProcessRoot(t *testing.T) {
	for _, c := range []struct{ in, dir, within string }{
		{"/12/root/etc/x", "12/root", "etc/x"},
		{"/12/task/13/cwd/a", "12/task/13/cwd", "a"},
		{"/12/root", "", ""},
		{"/12/status", "", ""},
		{"/mounts", "", ""},
	} {
		d, w, ok := processRoot(c.in)
		if d != c.dir || w != c.within || ok != (c.dir != "") {
			t.Errorf("%s: %q %q %v", c.in, d, w, ok)
		}
	}
}

// TestFakeProcHoldsNoDoorOut: a proc tree that is not the kernel's (a
// fake root's R/proc) cannot lead out of the root through a process's
// root, working directory or open-file link, nor through a link in place
// of the tree itself.
func TestFakeProcHoldsNoDoorOut(t *testing.T) {
	for _, walk := range []bool{false, true} {
		t.Run(map[bool]string{false: "openat2", true: "walk"}[walk], func(t *testing.T) {
			forceWalk(walk)
			defer forceWalk(false)
			root, outside := tree(t)
			pdir := filepath.Join(root, "proc", "4242")
			if err := os.MkdirAll(filepath.Join(pdir, "fd"), 0o755); err != nil {
				t.Fatal(err)
			}
			for from, to := range map[string]string{"root": "/", "cwd": outside, "fd/3": outside + "/secret"} {
				if err := os.Symlink(to, filepath.Join(pdir, from)); err != nil {
					t.Fatal(err)
				}
			}
			b := Boundary{Root: root}
			readSeen := func(seen string) (string, error) {
				f, err := b.File(seen, unix.O_RDONLY)
				if err != nil {
					return "", err
				}
				defer f.Close()
				got, err := io.ReadAll(f)
				return string(got), err
			}
			// <pid>/root of a fake tree is the root itself: inside it.
			if got, err := readSeen(pdir + "/root/etc/shadow"); err != nil || got != "inside shadow" {
				t.Errorf("<pid>/root/etc/shadow: %q, %v; want the root's own file", got, err)
			}
			if got, err := readSeen(pdir + "/root" + outside + "/secret"); err == nil {
				t.Errorf("<pid>/root led outside the root: %q", got)
			}
			for _, p := range []string{pdir + "/cwd/secret", pdir + "/fd/3"} {
				got, err := readSeen(p)
				if err == nil {
					t.Errorf("%s opened through a link a user wrote: %q", p, got)
				} else if !errors.Is(err, ErrNotProcfs) {
					t.Errorf("%s: %v; want ErrNotProcfs", p, err)
				}
			}
			// Root/proc itself a link out of the root: not followed out.
			root2, outside2 := tree(t)
			if err := os.MkdirAll(filepath.Join(outside2, "4242"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(outside2, "4242", "cmdline"), []byte("outside cmdline"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside2, filepath.Join(root2, "proc")); err != nil {
				t.Fatal(err)
			}
			b = Boundary{Root: root2}
			if got, err := readSeen(root2 + "/proc/4242/cmdline"); err == nil {
				t.Errorf("Root/proc → outside was followed: %q", got)
			}
		})
	}
}

// TestRealProcLinksFollowed: on the kernel's procfs, a process's root is
// followed (the kernel made the link) and resolved inside it.
func TestRealProcLinksFollowed(t *testing.T) {
	self := strconv.Itoa(os.Getpid())
	b := Boundary{Proc: "/proc"}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := b.File("/proc/"+self+"/root"+dir+"/f", unix.O_RDONLY)
	if err != nil {
		t.Fatalf("through the kernel's /proc/<pid>/root: %v", err)
	}
	got, _ := io.ReadAll(f)
	f.Close()
	if string(got) != "mine" {
		t.Errorf("got %q", got)
	}
}

// BenchmarkKernel is what every fast /proc read pays to know its tree is
// the kernel's (asked of the kernel once, then a cached answer).
func BenchmarkKernel(b *testing.B) {
	bd := Boundary{Proc: "/proc"}
	p := "/proc/" + strconv.Itoa(os.Getpid()) + "/stat"
	if !bd.Kernel(p) {
		b.Fatal("/proc is not the kernel's procfs here")
	}
	for i := 0; i < b.N; i++ {
		bd.Kernel(p)
	}
}

// A process's root itself, followed on the kernel's procfs, is its "/".
func TestProcessRootItself(t *testing.T) {
	b := Boundary{Proc: "/proc"}
	fd, err := b.Open("/proc/"+strconv.Itoa(os.Getpid())+"/root", unix.O_PATH)
	if err != nil {
		t.Fatalf("the process's root: %v", err)
	}
	defer unix.Close(fd)
	var got, want unix.Stat_t
	if err := unix.Fstat(fd, &got); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat("/", &want); err != nil {
		t.Fatal(err)
	}
	if got.Dev != want.Dev || got.Ino != want.Ino {
		t.Errorf("opened %d:%d, want / at %d:%d", got.Dev, got.Ino, want.Dev, want.Ino)
	}
}
