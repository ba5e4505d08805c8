package events

// A container runtime's records about a container's storage: the
// directories it keeps for a container on disk and must remove with it
// (containerd's task bundle io.containerd.runtime.v2.task/<ns>/<id> and
// its rootfs, the shim that holds them, dockerd's and CRI-O's overlay
// layer and its merged directory, CRI-O's overlay-containers/<id>), read
// by what they name and what is done to it, not by one runtime's
// sentence. The container's 64-hex ID is the object (keysOf).

// runtimeStorage tells a runtime's record about removing or unmounting
// a container's storage: it names the container by its 64-hex ID (a
// "bundle" or a "shim" without one is some other program's).
func runtimeStorage(lower string) bool {
	return containsAny(lower, "io.containerd.runtime.v", "shim", "bundle", "/merged", "mounted layer", "overlay-containers/", "root filesystem") &&
		containsAny(lower, "delete", "clean", "remov", "unmount", "umount", "unlinkat") && reSandbox.MatchString(lower)
}
