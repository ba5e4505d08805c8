package procfs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// Fuzz targets: no input may panic, and where a parser has a property that
// can be stated without re-implementing it, the property is checked. The
// seeds are the fixtures plus the weird cases; crashers found by fuzzing
// are kept under testdata/fuzz/<target>/.

func addFixtures(f *testing.F, dir string) {
	f.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", dir, "*"))
	if err != nil {
		f.Fatal(err)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// mountEscaper writes a field the way the kernel's mangle() does.
var mountEscaper = strings.NewReplacer(`\`, `\134`, " ", `\040`, "\t", `\011`, "\n", `\012`)

// formatMount writes m back as a mountinfo line.
func formatMount(m Mount) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %d %d:%d %s %s %s", m.ID, m.ParentID, m.Major, m.Minor,
		mountEscaper.Replace(m.Root), mountEscaper.Replace(m.MountPoint), strings.Join(m.Options, ","))
	for _, o := range m.Optional {
		b.WriteString(" " + o)
	}
	fmt.Fprintf(&b, " - %s %s %s", mountEscaper.Replace(m.FSType), mountEscaper.Replace(m.Source), m.SuperOptions)
	return b.String()
}

// reportedLines is how many lines the good values and LineErrors stand
// for: one each, except the summary past maxBadLines.
func reportedLines(good int, bad []LineError) int {
	n := good
	for _, e := range bad {
		var more moreBadLines
		if errors.As(e, &more) {
			n += more.n
		} else {
			n++
		}
	}
	return n
}

func nonBlankLines(data []byte) int {
	n := 0
	for _, l := range strings.Split(string(data), "\n") {
		if !isBlank(l) {
			n++
		}
	}
	return n
}

func FuzzParseMountInfo(f *testing.F) {
	addFixtures(f, "mountinfo")
	for _, s := range []string{
		"", "\n", " - ", "1 2 3:4 / / rw - a b c", `1 2 3:4 \ /\ rw - \ \ \`,
		"1 2 3:4 / / rw shared: master:x propagate_from:-1 unbindable:1 - t s o",
		"1 2 3:4 - /- - - - - -", "1 2 3:4 / / rw -  - -  ", "1 2 3:4 / / , - t  o",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		mounts, bad := ParseMountInfo(data)
		if got, want := reportedLines(len(mounts), bad), nonBlankLines(data); got != want || len(bad) > maxBadLines+1 {
			t.Fatalf("%d mounts + %d bad lines, want %d non-blank lines", len(mounts), len(bad), want)
		}
		prev := 0
		for _, e := range bad {
			if e.Line <= prev || !errors.Is(e, ErrMalformed) || len(e.Text) > maxLineErrorText {
				t.Fatalf("bad LineError %+v after line %d", e, prev)
			}
			prev = e.Line
		}
		for _, m := range mounts {
			if !strings.HasPrefix(m.MountPoint, "/") || m.Root == "" || m.FSType == "" || len(m.Options) == 0 {
				t.Fatalf("returned an invalid mount: %#v", m)
			}
			if cap(m.Options) != len(m.Options) || cap(m.Optional) != len(m.Optional) {
				t.Fatalf("option slices are not capped: %#v", m)
			}
			// Written back the kernel's way, the mount parses to itself.
			again, bad := ParseMountInfo([]byte(formatMount(m)))
			if len(bad) != 0 || len(again) != 1 {
				t.Fatalf("round trip of %#v: line %q: %v", m, formatMount(m), bad)
			}
			if !reflect.DeepEqual(again[0], m) {
				t.Fatalf("round trip changed the mount:\n was %#v\n now %#v", m, again[0])
			}
			_ = Classify(m)
			_ = m.Dev()
		}
	})
}

// formatStat writes s back as a stat line, zeros in the fields not kept.
func formatStat(s Stat) string {
	return fmt.Sprintf("%d (%s) %s %d %d %d %d %d %d %d 0 %d 0 %d %d 0 0 %d %d %d 0 %d %d %d\n",
		s.PID, s.Comm, s.State, s.PPID, s.PGRP, s.Session, s.TTYNr, s.TPGID, s.Flags,
		s.MinFlt, s.MajFlt, s.UTime, s.STime, s.Priority, s.Nice, s.NumThreads,
		s.StartTime, s.VSize, s.RSS)
}

func FuzzParseStat(f *testing.F) {
	addFixtures(f, "stat")
	for _, s := range []string{
		"", "()", ")(", "1 ) (", "1 (a) b) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21",
		"-1 () S -1 -2 -3 -4 -5 6 7 8 9 10 11 12 13 -14 -15 -16 17 18 19 20 21",
		"7 (x) S 1 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 100 0 18446744073709551616",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseStat(data)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrEmpty) {
				t.Fatalf("error wraps no sentinel: %v", err)
			}
			return
		}
		if len(s.State) != 1 || s.PID < 0 {
			t.Fatalf("invalid stat %+v", s)
		}
		again, err := ParseStat([]byte(formatStat(s)))
		if err != nil || again != s {
			t.Fatalf("round trip: %v\n was %+v\n now %+v", err, s, again)
		}
	})
}

func FuzzParseStatus(f *testing.F) {
	addFixtures(f, "status")
	for _, s := range []string{"", "Pid:\t1", "Name:\t\\", "Name:\\n", "Uid:\t1\t2\t3\nPid:\t-1", "Kthread:\t", "NSpid:\t\t\t"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseStatus(data)
		if err != nil && !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrEmpty) {
			t.Fatalf("error wraps no sentinel: %v", err)
		}
		if s.KthreadKnown == false && s.Kthread {
			t.Fatalf("Kthread set without KthreadKnown")
		}
		// Whatever parsed must be writable into a bundle.
		if _, err := json.Marshal(s); err != nil {
			t.Fatal(err)
		}
	})
}

// openFlagBits maps a FormatOpenFlags name back to its bits on amd64.
var openFlagBits = func() map[string]int {
	m := map[string]int{"O_RDONLY": 0, "O_WRONLY": 1, "O_RDWR": 2, "03": 3}
	for _, f := range genericOpenFlags {
		m[f.name] = f.bits
	}
	return m
}()

func FuzzParseFDInfo(f *testing.F) {
	for _, s := range []string{
		"pos:\t0\nflags:\t02100002\nmnt_id:\t29\nino:\t1311\n",
		"pos:\t0\nflags:\t02004002\nmnt_id:\t15\nino:\t1057\neventfd-count:                0\n",
		"pos:\t-9223372036854775808\nflags:\t017777777777\n", "pos:\nflags:\n", "flags:\t0", ":::",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fi, err := ParseFDInfo(data)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrEmpty) {
				t.Fatalf("error wraps no sentinel: %v", err)
			}
			return
		}
		for _, arch := range []string{"amd64", "arm64", "ppc64le", "sparc64"} {
			if s := FormatOpenFlags(fi.Flags, arch); s == "" || strings.Contains(s, "||") {
				t.Fatalf("FormatOpenFlags(0%o, %s) = %q", fi.Flags, arch, s)
			}
		}
		// The names decode back to exactly the flags.
		sum := 0
		for _, name := range strings.Split(FormatOpenFlags(fi.Flags, "amd64"), "|") {
			bits, ok := openFlagBits[name]
			if !ok {
				n, err := strconv.ParseUint(name, 8, 64)
				if err != nil || !strings.HasPrefix(name, "0") {
					t.Fatalf("unexpected name %q in flags 0%o", name, fi.Flags)
				}
				bits = int(n)
			}
			if sum&bits != 0 {
				t.Fatalf("bits of %q named twice in 0%o", name, fi.Flags)
			}
			sum |= bits
		}
		if sum != fi.Flags {
			t.Fatalf("flags 0%o decode to 0%o", fi.Flags, sum)
		}
	})
}

// formatMapEntry writes e back the way show_map_vma() does.
func formatMapEntry(e MapEntry) string {
	line := fmt.Sprintf("%08x-%08x %s %08x %02x:%02x %d ", e.Start, e.End, e.Perms, e.Offset, e.Major, e.Minor, e.Inode)
	if e.Pathname != "" || e.Deleted {
		line += strings.Repeat(" ", 8) + strings.ReplaceAll(e.Pathname, "\n", `\012`)
		if e.Deleted {
			line += deletedSuffix
		}
	}
	return line
}

func FuzzParseMaps(f *testing.F) {
	addFixtures(f, "maps")
	for _, s := range []string{
		"", "0-1 rwxp 0 0:0 0", "0-1 rwxp 0 0:0 0  (deleted)", "0-1 ---s 0 0:0 0 \\012",
		"ffffffffffffffff-0 r--p 0 0:0 0", "1-2 r--p 0 0:0 0 / (deleted) (deleted)",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, bad := ParseMaps(data)
		if got, want := reportedLines(len(entries), bad), nonBlankLines(data); got != want || len(bad) > maxBadLines+1 {
			t.Fatalf("%d entries + %d bad lines, want %d non-blank lines", len(entries), len(bad), want)
		}
		for _, e := range entries {
			if e.End <= e.Start || !validPerms(e.Perms) {
				t.Fatalf("invalid entry %+v", e)
			}
			again, bad := ParseMaps([]byte(formatMapEntry(e)))
			if len(bad) != 0 || len(again) != 1 || again[0] != e {
				t.Fatalf("round trip of %+v via %q: %+v %v", e, formatMapEntry(e), again, bad)
			}
		}
	})
}

func FuzzParseCmdline(f *testing.F) {
	for _, s := range []string{
		"", "\x00", "a\x00b\x00", "a\x00\x00b", "nginx: master process\x00\x00\x00", " \t ", "a b\x00c d",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		args := ParseCmdline(data)
		trimmed := string(bytes.TrimRight(data, "\x00"))
		switch {
		case trimmed == "":
			if args != nil {
				t.Fatalf("%q: got %q, want nil", data, args)
			}
		case strings.Contains(trimmed, "\x00"):
			// NUL-separated: joining the arguments gives the input back.
			if strings.Join(args, "\x00") != trimmed {
				t.Fatalf("%q: args %q do not join back", data, args)
			}
		default:
			if len(args) == 0 {
				t.Fatalf("%q: no arguments", data)
			}
			for _, a := range args {
				if a == "" {
					t.Fatalf("%q: empty argument from a space-separated title: %q", data, args)
				}
			}
		}
	})
}

func FuzzParseLink(f *testing.F) {
	for _, s := range []string{
		"socket:[1]", "pipe:[2]", "anon_inode:[eventfd]", "anon_inode:", "mnt:[3]", "/dev/rbd3",
		"/x (deleted)", " (deleted)", "/memfd: (deleted)", ":[", "a:[]", "/dev/shm", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, target string) {
		l := ParseLink(target)
		switch l.Kind {
		case LinkPath, LinkDevice:
			if !strings.HasPrefix(l.Path, "/") || !strings.HasPrefix(target, l.Path) {
				t.Fatalf("%q: path %q", target, l.Path)
			}
		case LinkSocket, LinkPipe, LinkAnonInode, LinkMemfd, LinkNamespace, LinkUnknown:
		default:
			t.Fatalf("%q: kind %q", target, l.Kind)
		}
		if l.Deleted && !strings.HasSuffix(target, deletedSuffix) {
			t.Fatalf("%q: deleted without the suffix", target)
		}
		if l.Kind == LinkNamespace {
			kind, inode, err := ParseNSLink(target)
			if err != nil || kind != l.Name || inode != l.Inode {
				t.Fatalf("%q: ParseNSLink disagrees: %q %d %v", target, kind, inode, err)
			}
		}
	})
}

// A pod UID or container ID found in a cgroup file is one the patterns
// accept, and appears in the path it came from.
func FuzzParseSelfCgroup(f *testing.F) {
	f.Add([]byte("0::/kubepods.slice/kubepods-pod1b4e0c2a_7f3d_4a51_9c0e_2d5e8f6a7b90.slice/cri-containerd-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.scope\n"))
	f.Add([]byte("11:memory:/kubepods/burstable/pod0123456789abcdef0123456789abcdef/x\n0::/\n"))
	f.Add([]byte("0::/\n"))
	f.Add([]byte("::\n:\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		got := ParseSelfCgroup(data)
		if got.PodUID != "" && (!ValidPodUID(got.PodUID) || !strings.Contains(got.Path, strings.ReplaceAll(got.PodUID, "-", "")[:8])) {
			t.Errorf("pod UID %q from path %q", got.PodUID, got.Path)
		}
		if got.ContainerID != "" && (len(got.ContainerID) != 64 || !strings.Contains(got.Path, got.ContainerID)) {
			t.Errorf("container ID %q from path %q", got.ContainerID, got.Path)
		}
		if got.Path != "" && !bytes.Contains(data, []byte(got.Path)) {
			t.Errorf("path %q is not in the input", got.Path)
		}
	})
}

// A pod UID taken from a mount root is a valid UID found in the root.
func FuzzPodUIDFromMountRoot(f *testing.F) {
	f.Add("/var/lib/kubelet/pods/1b4e0c2a-7f3d-4a51-9c0e-2d5e8f6a7b90/etc-hosts")
	f.Add("/pods/0123456789abcdef0123456789abcdef/volumes/x")
	f.Add("/")
	f.Fuzz(func(t *testing.T, root string) {
		uid, ok := PodUIDFromMountRoot(root)
		if ok != (uid != "") || ok && (!ValidPodUID(uid) || !strings.Contains(root, "pods/"+uid+"/")) {
			t.Errorf("PodUIDFromMountRoot(%q) = %q, %v", root, uid, ok)
		}
	})
}
