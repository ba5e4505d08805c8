package procfs

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func readFixture(t testing.TB, parts ...string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(append([]string{"testdata"}, parts...)...))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseMountInfoLine(t *testing.T) {
	tests := []struct {
		name string
		line string
		want Mount
	}{{
		name: "proc_pid_mountinfo(5) example",
		line: `36 35 98:0 /mnt1 /mnt/parent rw,noatime master:1 - ext3 /dev/root rw,errors=continue`,
		want: Mount{
			ID: 36, ParentID: 35, Major: 98, Minor: 0, Root: "/mnt1", MountPoint: "/mnt/parent",
			Options: []string{"rw", "noatime"}, Optional: []string{"master:1"},
			Propagation: Propagation{Master: 1},
			FSType:      "ext3", Source: "/dev/root", SuperOptions: "rw,errors=continue",
		},
	}, {
		name: "no optional fields: private",
		line: `2892 2729 250:0 / /host/data/rbd rw,relatime - ext4 /dev/rbd3 rw,stripe=1024,data=ordered`,
		want: Mount{
			ID: 2892, ParentID: 2729, Major: 250, Root: "/", MountPoint: "/host/data/rbd",
			Options: []string{"rw", "relatime"},
			FSType:  "ext4", Source: "/dev/rbd3", SuperOptions: "rw,stripe=1024,data=ordered",
		},
	}, {
		name: "shared and slave bind mount with escaped spaces",
		line: `41 22 253:1 /srv/data\040dir /mnt/data\040dir rw,relatime shared:5 master:3 - ext4 /dev/vda1 rw`,
		want: Mount{
			ID: 41, ParentID: 22, Major: 253, Minor: 1, Root: "/srv/data dir", MountPoint: "/mnt/data dir",
			Options: []string{"rw", "relatime"}, Optional: []string{"shared:5", "master:3"},
			Propagation: Propagation{Shared: 5, Master: 3},
			FSType:      "ext4", Source: "/dev/vda1", SuperOptions: "rw",
		},
	}, {
		name: "every escape the kernel writes",
		line: `50 22 0:70 /a\011b /mnt/x\012y\134z\040 rw - 9p my\040share rw`,
		want: Mount{
			ID: 50, ParentID: 22, Minor: 70, Root: "/a\tb", MountPoint: "/mnt/x\ny\\z ",
			Options: []string{"rw"}, FSType: "9p", Source: "my share", SuperOptions: "rw",
		},
	}, {
		name: "backslash without an octal escape is kept",
		line: `51 22 0:71 / /mnt/a\b\9\777\04 rw - tmpfs tmpfs rw`,
		want: Mount{
			ID: 51, ParentID: 22, Minor: 71, Root: "/", MountPoint: `/mnt/a\b\9\777\04`,
			Options: []string{"rw"}, FSType: "tmpfs", Source: "tmpfs", SuperOptions: "rw",
		},
	}, {
		name: "unbindable, propagate_from, unknown and bad tags",
		line: `52 22 0:72 / /mnt/u rw master:7 propagate_from:2 unbindable future:9 shared:x - tmpfs tmpfs rw`,
		want: Mount{
			ID: 52, ParentID: 22, Minor: 72, Root: "/", MountPoint: "/mnt/u", Options: []string{"rw"},
			Optional:    []string{"master:7", "propagate_from:2", "unbindable", "future:9", "shared:x"},
			Propagation: Propagation{Master: 7, PropagateFrom: 2, Unbindable: true},
			FSType:      "tmpfs", Source: "tmpfs", SuperOptions: "rw",
		},
	}, {
		name: "namespace file bind mount has a non-path root",
		line: `42 28 0:4 net:[4026532281] /run/netns/cni-1f2e rw - nsfs nsfs rw`,
		want: Mount{
			ID: 42, ParentID: 28, Minor: 4, Root: "net:[4026532281]", MountPoint: "/run/netns/cni-1f2e",
			Options: []string{"rw"}, FSType: "nsfs", Source: "nsfs", SuperOptions: "rw",
		},
	}, {
		name: "empty source is kept as an empty field",
		line: `49 22 0:62 / /mnt/nosource rw,relatime - tmpfs  rw,inode64`,
		want: Mount{
			ID: 49, ParentID: 22, Minor: 62, Root: "/", MountPoint: "/mnt/nosource",
			Options: []string{"rw", "relatime"}, FSType: "tmpfs", SuperOptions: "rw,inode64",
		},
	}, {
		name: "a root of - is not the separator",
		line: `53 22 0:73 - /mnt/dash rw - tmpfs tmpfs rw`,
		want: Mount{
			ID: 53, ParentID: 22, Minor: 73, Root: "-", MountPoint: "/mnt/dash",
			Options: []string{"rw"}, FSType: "tmpfs", Source: "tmpfs", SuperOptions: "rw",
		},
	}, {
		name: "FUSE subtype and super options holding a space",
		line: `40 32 0:52 / /var/lib/kubelet/pods/p/volumes/kubernetes.io~csi/pvc/mount rw,nosuid,nodev,relatime shared:80 - fuse.ceph-fuse ceph-fuse rw,user_id=0 odd`,
		want: Mount{
			ID: 40, ParentID: 32, Minor: 52, Root: "/", MountPoint: "/var/lib/kubelet/pods/p/volumes/kubernetes.io~csi/pvc/mount",
			Options: []string{"rw", "nosuid", "nodev", "relatime"}, Optional: []string{"shared:80"},
			Propagation: Propagation{Shared: 80},
			FSType:      "fuse.ceph-fuse", Source: "ceph-fuse", SuperOptions: "rw,user_id=0 odd",
		},
	}, {
		name: "large device numbers",
		line: `7 1 4095:1048575 / /mnt/big rw - ext4 /dev/big rw`,
		want: Mount{
			ID: 7, ParentID: 1, Major: 4095, Minor: 1048575, Root: "/", MountPoint: "/mnt/big",
			Options: []string{"rw"}, FSType: "ext4", Source: "/dev/big", SuperOptions: "rw",
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, bad := ParseMountInfo([]byte(tt.line + "\n"))
			if len(bad) != 0 {
				t.Fatalf("bad lines: %v", bad)
			}
			if len(got) != 1 {
				t.Fatalf("got %d mounts, want 1", len(got))
			}
			if !reflect.DeepEqual(got[0], tt.want) {
				t.Errorf("got  %#v\nwant %#v", got[0], tt.want)
			}
		})
	}
}

func TestParseMountInfoBadLines(t *testing.T) {
	tests := []struct {
		name   string
		line   string
		reason string
	}{
		{"garbage", "garbage that is not a mount line", "mount ID"},
		{"binary", "\x00\xff\xfe 1 2", "fewer than 6 fields"},
		{"truncated after device", "28 22 0:25", "fewer than 6 fields"},
		{"no separator", "23 22 0:21 / /proc rw,nosuid shared:12 proc proc rw", `no " - " separator`},
		{"options then end", "23 22 0:21 / /proc rw", `no " - " separator`},
		{"separator at end", "23 22 0:21 / /proc rw -", "no filesystem type"},
		{"no source", "27 22 0:24 / /dev/shm rw - tmpfs", "no source"},
		{"no super options", "27 22 0:24 / /dev/shm rw - tmpfs tmpfs", "no super options"},
		{"non-numeric id", "x1 22 0:22 / /sys rw - sysfs sysfs rw", "mount ID"},
		{"negative id", "-1 22 0:22 / /sys rw - sysfs sysfs rw", "mount ID"},
		{"plus sign id", "+1 22 0:22 / /sys rw - sysfs sysfs rw", "mount ID"},
		{"huge id", "99999999999999999999999 22 0:22 / /sys rw - sysfs sysfs rw", "mount ID"},
		{"non-numeric parent", "1 p 0:22 / /sys rw - sysfs sysfs rw", "parent ID"},
		{"dash device", "25 22 8-1 / /dev rw - devtmpfs udev rw", "major:minor"},
		{"half device", "25 22 8: / /dev rw - devtmpfs udev rw", "major:minor"},
		{"hex device", "25 22 0:1a / /dev rw - devtmpfs udev rw", "major:minor"},
		{"minor overflows 32 bits", "25 22 0:4294967296 / /dev rw - devtmpfs udev rw", "major:minor"},
		{"relative mount point", "26 22 0:23 / dev/pts rw - devpts devpts rw", "start with '/'"},
		{"empty root", "26 22 0:23  /dev/pts rw - devpts devpts rw", "empty root"},
		{"empty options", "26 22 0:23 / /dev/pts  - devpts devpts rw", "empty mount options"},
		{"empty fs type", "26 22 0:23 / /dev/pts rw -  devpts rw", "empty filesystem type"},
		{"fields collapsed by a tool", "26\t22\t0:23\t/\t/dev/pts\trw\t-\tdevpts\tdevpts\trw", "fewer than 6 fields"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, bad := ParseMountInfo([]byte(tt.line))
			if len(got) != 0 {
				t.Fatalf("parsed a bad line: %#v", got)
			}
			if len(bad) != 1 {
				t.Fatalf("got %d line errors, want 1", len(bad))
			}
			e := bad[0]
			if e.Line != 1 || e.Text != tt.line {
				t.Errorf("LineError = {Line:%d Text:%q}, want {1 %q}", e.Line, e.Text, tt.line)
			}
			if !strings.Contains(e.Error(), tt.reason) {
				t.Errorf("error %q does not say %q", e.Error(), tt.reason)
			}
			if !errors.Is(e, ErrMalformed) {
				t.Errorf("error %q does not wrap ErrMalformed", e.Error())
			}
		})
	}
}

// A damaged file costs its bad lines, not the file.
func TestParseMountInfoDamagedFile(t *testing.T) {
	mounts, bad := ParseMountInfo(readFixture(t, "mountinfo", "damaged.txt"))
	var points []string
	for _, m := range mounts {
		points = append(points, m.MountPoint)
	}
	if want := []string{"/", "/sys", "/run"}; !reflect.DeepEqual(points, want) {
		t.Errorf("mount points = %q, want %q", points, want)
	}
	var lines []int
	for _, e := range bad {
		lines = append(lines, e.Line)
		if !errors.Is(e, ErrMalformed) {
			t.Errorf("line %d: %v does not wrap ErrMalformed", e.Line, e)
		}
	}
	// Line 2 is empty and line 10 blank: skipped, not reported.
	if want := []int{3, 4, 6, 7, 8, 9, 11}; !reflect.DeepEqual(lines, want) {
		t.Errorf("bad lines = %v, want %v", lines, want)
	}
}

func TestParseMountInfoKubeletNode(t *testing.T) {
	mounts, bad := ParseMountInfo(readFixture(t, "mountinfo", "kubelet-node.txt"))
	if len(bad) != 0 {
		t.Fatalf("bad lines: %v", bad)
	}
	if len(mounts) != 28 {
		t.Fatalf("got %d mounts, want 28", len(mounts))
	}
	byPoint := map[string]Mount{}
	for _, m := range mounts {
		byPoint[m.MountPoint] = m
	}
	// The rbd device is mounted twice (global mount and pod mount), and
	// both are found by its device number.
	var rbd []string
	for _, m := range mounts {
		if m.Dev() == "252:0" {
			rbd = append(rbd, m.MountPoint)
		}
	}
	if len(rbd) != 2 {
		t.Errorf("mounts of 252:0 = %q, want the global and the pod mount", rbd)
	}
	checks := []struct {
		point  string
		class  FSClass
		source string
		prop   string
	}{
		{"/", ClassBlock, "/dev/vda1", "shared:1"},
		{"/proc", ClassPseudo, "proc", "shared:12"},
		{"/sys/fs/cgroup", ClassPseudo, "cgroup2", "shared:9"},
		{"/sys/fs/fuse/connections", ClassPseudo, "fusectl", "shared:15"},
		{"/proc/sys/fs/binfmt_misc", ClassPseudo, "systemd-1", "shared:16"},
		{"/dev/shm", ClassOther, "tmpfs", "shared:4"},
		{"/var/lib/kubelet/plugins/kubernetes.io/rbd/mounts/k8s-image-kubernetes-dynamic-pvc-c838258f", ClassBlock, "/dev/rbd0", "shared:50"},
		{"/var/lib/kubelet/plugins/kubernetes.io/csi/cephfs.csi.ceph.com/abc123/globalmount", ClassNetwork, "10.0.0.11:6789,10.0.0.12:6789:/volumes/csi/csi-vol-1b2c/4d5e", "shared:60"},
		{"/var/lib/kubelet/pods/9c0d1e2f-4444-4555-8666-c777888999aa/volumes/kubernetes.io~nfs/nfs-data", ClassNetwork, "nfs.example.internal:/exports/data", "shared:70"},
		{"/var/lib/kubelet/pods/1e2f3a4b-5555-4666-8777-d888999aaabb/volumes/kubernetes.io~csi/pvc-fuse/mount", ClassNetwork, "ceph-fuse", "shared:80"},
		{"/var/lib/kubelet/pods/bb22cc33-7777-4888-8999-faaabbbcccdd/volumes/kubernetes.io~csi/smb-pv/mount", ClassNetwork, "//fileserver/team share", "shared:110"},
		{"/mnt/data dir", ClassBlock, "/dev/vda1", "shared:5 master:3"},
		{"/run/netns/cni-1f2e3d4c-aaaa-bbbb-cccc-0123456789ab", ClassPseudo, "nsfs", "private"},
		{"/var/lib/kubelet/plugins/kubernetes.io/csi/volumeDevices/publish/pvc-b10c/5d6e7f80", ClassPseudo, "udev", "shared:2"},
		{"/snap/core20/1974", ClassBlock, "/dev/loop0", "shared:100"},
		{"/run/containerd/io.containerd.runtime.v2.task/k8s.io/3f2a9c1d/rootfs", ClassOther, "overlay", "shared:40"},
		{"/mnt/private", ClassOther, "tmpfs", "unbindable"},
		{"/mnt/slave", ClassOther, "tmpfs", "master:7 propagate_from:2"},
		{"/mnt/nosource", ClassOther, "", "private"},
	}
	for _, c := range checks {
		m, ok := byPoint[c.point]
		if !ok {
			t.Errorf("%s: not parsed", c.point)
			continue
		}
		if got := Classify(m); got != c.class {
			t.Errorf("%s: class %v, want %v", c.point, got, c.class)
		}
		if m.Source != c.source {
			t.Errorf("%s: source %q, want %q", c.point, m.Source, c.source)
		}
		if got := m.Propagation.String(); got != c.prop {
			t.Errorf("%s: propagation %q, want %q", c.point, got, c.prop)
		}
	}
	if m := byPoint["/"]; !m.HasOption("relatime") || m.HasOption("ro") {
		t.Errorf("/: options %q", m.Options)
	}
}

// Incident 002: the container's copy of the rbd mount has no propagation
// fields, so the host's unmount never reached it.
func TestParseMountInfoIncident002(t *testing.T) {
	mounts, bad := ParseMountInfo(readFixture(t, "mountinfo", "node-exporter-ns.txt"))
	if len(bad) != 0 {
		t.Fatalf("bad lines: %v", bad)
	}
	var held []Mount
	for _, m := range mounts {
		if m.Dev() == "250:0" {
			held = append(held, m)
		}
	}
	if len(held) != 2 {
		t.Fatalf("mounts of 250:0: %d, want 2", len(held))
	}
	for _, m := range held {
		if m.Source != "/dev/rbd3" || !m.Propagation.Private() || Classify(m) != ClassBlock {
			t.Errorf("%s: source %q, propagation %v, class %v", m.MountPoint, m.Source, m.Propagation, Classify(m))
		}
	}
}

// Options and Optional share backing arrays across mounts; appending to one
// mount's slice must not write into the next mount's.
func TestParseMountInfoSlicesDoNotAlias(t *testing.T) {
	mounts, _ := ParseMountInfo([]byte("1 0 0:1 / / rw shared:1 - ext4 /dev/sda rw\n2 1 0:2 / /a ro,nosuid shared:2 - ext4 /dev/sdb rw\n"))
	_ = append(mounts[0].Options, "CLOBBER")
	_ = append(mounts[0].Optional, "CLOBBER")
	if mounts[1].Options[0] != "ro" || mounts[1].Optional[0] != "shared:2" {
		t.Fatalf("second mount changed: %q %q", mounts[1].Options, mounts[1].Optional)
	}
}

// The caller's buffer is not retained: it can be reused after the call.
func TestParseMountInfoCopiesInput(t *testing.T) {
	buf := []byte("1 0 8:1 / /mnt rw - ext4 /dev/sda1 rw\n")
	mounts, _ := ParseMountInfo(buf)
	for i := range buf {
		buf[i] = 'X'
	}
	if mounts[0].MountPoint != "/mnt" || mounts[0].Options[0] != "rw" {
		t.Fatalf("mount changed with the input buffer: %#v", mounts[0])
	}
}

func TestParseMountInfoEmpty(t *testing.T) {
	for _, in := range []string{"", "\n", "\n\n  \n"} {
		m, bad := ParseMountInfo([]byte(in))
		if len(m) != 0 || len(bad) != 0 {
			t.Errorf("%q: %v %v", in, m, bad)
		}
	}
}

func TestMountDev(t *testing.T) {
	if got := (Mount{Major: 252, Minor: 16}).Dev(); got != "252:16" {
		t.Errorf("Dev() = %q", got)
	}
}

// A file of garbage costs a bounded list of errors, not one per line.
func TestParseMountInfoManyBadLines(t *testing.T) {
	in := strings.Repeat("garbage\n", 1000) + "1 0 8:1 / /mnt rw - ext4 /dev/sda1 rw\n" + strings.Repeat("x\n", 500)
	mounts, bad := ParseMountInfo([]byte(in))
	if len(mounts) != 1 || mounts[0].MountPoint != "/mnt" {
		t.Fatalf("good line lost: %v", mounts)
	}
	if len(bad) != maxBadLines+1 {
		t.Fatalf("%d line errors, want %d", len(bad), maxBadLines+1)
	}
	last := bad[len(bad)-1]
	if last.Line != maxBadLines+1 || last.Text != "garbage" || !errors.Is(last, ErrMalformed) ||
		!strings.Contains(last.Error(), "and 1400 more malformed lines") {
		t.Errorf("summary = %+v: %v", last, last)
	}
}

func TestLineErrorTextIsCapped(t *testing.T) {
	_, bad := ParseMountInfo([]byte(strings.Repeat("x", 10000)))
	if len(bad) != 1 || len(bad[0].Text) != maxLineErrorText {
		t.Fatalf("got %d errors, text length %d", len(bad), len(bad[0].Text))
	}
}
