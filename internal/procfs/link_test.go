package procfs

import (
	"errors"
	"testing"
)

func TestParseLink(t *testing.T) {
	tests := []struct {
		in   string
		want Link
	}{
		{"socket:[12345]", Link{Kind: LinkSocket, Inode: 12345}},
		{"pipe:[15350]", Link{Kind: LinkPipe, Inode: 15350}},
		{"anon_inode:[eventfd]", Link{Kind: LinkAnonInode, Name: "eventfd"}},
		{"anon_inode:[eventpoll]", Link{Kind: LinkAnonInode, Name: "eventpoll"}},
		{"anon_inode:inotify", Link{Kind: LinkAnonInode, Name: "inotify"}},
		{"anon_inode:bpf-map", Link{Kind: LinkAnonInode, Name: "bpf-map"}},
		{"net:[4026531840]", Link{Kind: LinkNamespace, Name: "net", Inode: 4026531840}},
		{"mnt:[4026531841]", Link{Kind: LinkNamespace, Name: "mnt", Inode: 4026531841}},
		{"/dev/null", Link{Kind: LinkDevice, Path: "/dev/null"}},
		{"/dev/rbd3", Link{Kind: LinkDevice, Path: "/dev/rbd3"}},
		{"/dev/pts/0", Link{Kind: LinkDevice, Path: "/dev/pts/0"}},
		{"/dev/shm/sem.lock", Link{Kind: LinkPath, Path: "/dev/shm/sem.lock"}},
		{"/dev/shm", Link{Kind: LinkPath, Path: "/dev/shm"}},
		{"/dev/shmem0", Link{Kind: LinkDevice, Path: "/dev/shmem0"}},
		{"/dev/mqueue/q", Link{Kind: LinkPath, Path: "/dev/mqueue/q"}},
		{"/", Link{Kind: LinkPath, Path: "/"}},
		{"/var/lib/kubelet/pods/p/volumes/kubernetes.io~rbd/pvc-1", Link{Kind: LinkPath, Path: "/var/lib/kubelet/pods/p/volumes/kubernetes.io~rbd/pvc-1"}},
		{"/var/log/app log.txt (deleted)", Link{Kind: LinkPath, Path: "/var/log/app log.txt", Deleted: true}},
		{"/dev/zero (deleted)", Link{Kind: LinkDevice, Path: "/dev/zero", Deleted: true}},
		{"/memfd:jit-cache (deleted)", Link{Kind: LinkMemfd, Name: "jit-cache", Deleted: true}},
		{"/path/with:[123]", Link{Kind: LinkPath, Path: "/path/with:[123]"}},
		{"/tmp/x:[1]", Link{Kind: LinkPath, Path: "/tmp/x:[1]"}},
		{"bpf:[7]", Link{Kind: LinkUnknown, Path: "bpf:[7]", Inode: 7}},
		{"socket:[12x]", Link{Kind: LinkUnknown, Path: "socket:[12x]"}},
		{"relative/path", Link{Kind: LinkUnknown, Path: "relative/path"}},
		{"", Link{Kind: LinkUnknown}},
	}
	for _, tt := range tests {
		if got := ParseLink(tt.in); got != tt.want {
			t.Errorf("ParseLink(%q) = %+v, want %+v", tt.in, got, tt.want)
		}
	}
}

func TestParseNSLink(t *testing.T) {
	for _, tt := range []struct {
		in    string
		kind  string
		inode uint64
	}{
		{"mnt:[4026531841]", "mnt", 4026531841},
		{"pid:[4026531836]", "pid", 4026531836},
		{"cgroup:[4026531835]", "cgroup", 4026531835},
		{"time:[4026531834]", "time", 4026531834},
	} {
		kind, inode, err := ParseNSLink(tt.in)
		if err != nil || kind != tt.kind || inode != tt.inode {
			t.Errorf("ParseNSLink(%q) = %q, %d, %v", tt.in, kind, inode, err)
		}
	}
	for _, in := range []string{"", "mnt", "mnt:[]", "mnt:[12", "mnt:[-1]", "mnt:[1] ", "socket:[1]", "MNT:[1]", "mnt:[99999999999999999999]"} {
		if _, _, err := ParseNSLink(in); !errors.Is(err, ErrMalformed) {
			t.Errorf("ParseNSLink(%q) err = %v, want ErrMalformed", in, err)
		}
	}
}

func TestParseMountNS(t *testing.T) {
	if ino, err := ParseMountNS("mnt:[4026531841]"); err != nil || ino != 4026531841 {
		t.Errorf("ParseMountNS = %d, %v", ino, err)
	}
	if _, err := ParseMountNS("net:[4026531840]"); !errors.Is(err, ErrMalformed) {
		t.Errorf("net link accepted as mnt: %v", err)
	}
}
