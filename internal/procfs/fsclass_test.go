package procfs

import (
	"sort"
	"testing"
)

func TestFSTypePredicates(t *testing.T) {
	tests := []struct {
		fstype                string
		network, fuse, pseudo bool
	}{
		{"nfs", true, false, false},
		{"nfs4", true, false, false},
		{"cifs", true, false, false},
		{"smb3", true, false, false},
		{"ceph", true, false, false},
		{"glusterfs", true, false, false},
		{"9p", true, false, false},
		{"fuse.ceph-fuse", true, true, false},
		{"fuse.glusterfs", true, true, false},
		{"fuse.sshfs", true, true, false},
		{"fuse", false, true, false},
		{"fuseblk", false, true, false},
		{"fuse.lxcfs", false, true, false},
		{"fusectl", false, false, true},
		{"proc", false, false, true},
		{"cgroup", false, false, true},
		{"cgroup2", false, false, true},
		{"autofs", false, false, true},
		{"nsfs", false, false, true},
		{"rpc_pipefs", false, false, true},
		{"tmpfs", false, false, false},
		{"ext4", false, false, false},
		{"overlay", false, false, false},
		{"", false, false, false},
	}
	for _, tt := range tests {
		if got := IsNetworkFS(tt.fstype); got != tt.network {
			t.Errorf("IsNetworkFS(%q) = %v", tt.fstype, got)
		}
		if got := IsFUSE(tt.fstype); got != tt.fuse {
			t.Errorf("IsFUSE(%q) = %v", tt.fstype, got)
		}
		if got := IsPseudoFS(tt.fstype); got != tt.pseudo {
			t.Errorf("IsPseudoFS(%q) = %v", tt.fstype, got)
		}
	}
}

func TestIsBlockBacked(t *testing.T) {
	tests := []struct {
		m    Mount
		want bool
	}{
		{Mount{Major: 252, Source: "/dev/rbd3", FSType: "ext4"}, true},
		{Mount{Major: 7, Source: "/dev/loop0", FSType: "squashfs"}, true},
		{Mount{Major: 253, Minor: 3, Source: "/dev/mapper/vg-data", FSType: "xfs"}, true},
		{Mount{Major: 0, Minor: 40, Source: "/dev/sda2", FSType: "btrfs"}, true},
		{Mount{Major: 0, Minor: 24, Source: "tmpfs", FSType: "tmpfs"}, false},
		{Mount{Major: 0, Minor: 5, Source: "/dev/fake", FSType: "tmpfs"}, false},
		{Mount{Major: 8, Minor: 1, Source: "host:/export", FSType: "nfs"}, false},
	}
	for _, tt := range tests {
		if got := IsBlockBacked(tt.m); got != tt.want {
			t.Errorf("IsBlockBacked(%s %s %s) = %v", tt.m.Dev(), tt.m.Source, tt.m.FSType, got)
		}
	}
}

// Sorting by class puts the mounts most likely to hang first.
func TestClassifyOrdersProbes(t *testing.T) {
	mounts, _ := ParseMountInfo(readFixture(t, "mountinfo", "kubelet-node.txt"))
	sort.SliceStable(mounts, func(i, j int) bool { return Classify(mounts[i]) < Classify(mounts[j]) })
	var classes []FSClass
	for _, m := range mounts {
		if n := len(classes); n == 0 || classes[n-1] != Classify(m) {
			classes = append(classes, Classify(m))
		}
	}
	want := []FSClass{ClassNetwork, ClassBlock, ClassOther, ClassPseudo}
	if len(classes) != len(want) {
		t.Fatalf("class order %v, want %v", classes, want)
	}
	for i := range want {
		if classes[i] != want[i] {
			t.Fatalf("class order %v, want %v", classes, want)
		}
	}
	if mounts[0].FSType != "ceph" {
		t.Errorf("first probe %s (%s), want the cephfs mount", mounts[0].MountPoint, mounts[0].FSType)
	}
	for c := ClassNetwork; c <= ClassPseudo+1; c++ {
		if c.String() == "" {
			t.Errorf("FSClass(%d) has no name", c)
		}
	}
}
