package dirshape

import "testing"

// Which mounts below a root are container-runtime volumes dirshape scans
// on their own.
func TestDsIsRuntimeVolume(t *testing.T) {
	for _, tc := range []struct {
		root, rel string
		want      bool
	}{
		{"/var/lib/docker/volumes", "big/_data", true},
		{"/var/lib/docker/volumes", "big/_data/sub", true},
		{"/var/lib/docker", "volumes/big/_data", true},
		{"/host/var/lib/docker/volumes", "big/_data", true},
		{"/var/lib/containers/storage", "volumes/pgdata/_data", true},
		{"/var/lib/nerdctl/1935db59", "volumes/default/cache/_data", true},
		{"/var/lib/docker/volumes", "big", false},
		{"/var/lib/docker/volumes", "_data", false},
		{"/var/lib/docker/overlay2", "abc/merged", false},
		{"/var/lib/containerd", "io.containerd.grpc.v1.cri/sandboxes/x/shm", false},
		{"/var/lib/docker/volumes", "a/b/c/d/_data", false},
		// The root's own name is not the volume's _data.
		{"/srv/volumes/x/_data", "sub", false},
	} {
		if got := isRuntimeVolume(tc.root, tc.rel); got != tc.want {
			t.Errorf("isRuntimeVolume(%q, %q) = %v, want %v", tc.root, tc.rel, got, tc.want)
		}
	}
}

// Mountpoints come from the host's mount table, which any user who can
// mount (a FUSE daemon, a container) writes: no panic, and a volume is
// only ever found below its root.
func FuzzDsIsRuntimeVolume(f *testing.F) {
	f.Add("/var/lib/docker/volumes", "big/_data")
	f.Add("/var/lib/nerdctl/x", "volumes/default/v/_data")
	f.Add("/", "volumes/a/_data")
	f.Add("", "_data/../volumes")
	f.Fuzz(func(t *testing.T, root, rel string) {
		got := isRuntimeVolume(root, rel)
		if rel == "" && got {
			t.Errorf("root %q alone read as a volume", root)
		}
	})
}
