package procfs

import "strings"

// networkFS are kernel filesystems whose I/O goes over the network (or, for
// the cluster filesystems ocfs2 and gfs2, waits on a network lock manager).
// Touching one whose server is gone can block in the kernel indefinitely
// (hard NFS mounts, cephfs in incident 003).
var networkFS = map[string]bool{
	"nfs": true, "nfs4": true, "cifs": true, "smb3": true, "smbfs": true,
	"ceph": true, "glusterfs": true, "9p": true, "afs": true, "coda": true,
	"ncpfs": true, "ncp": true, "lustre": true, "gpfs": true, "beegfs": true,
	"orangefs": true, "pvfs2": true, "ocfs2": true, "gfs2": true, "davfs": true,
}

// networkFUSE are FUSE subtypes (the part after "fuse.") of well-known
// network clients; ceph-fuse is the one ceph-csi mounts. An unknown FUSE
// subtype is still probed early through IsFUSE.
var networkFUSE = map[string]bool{
	"ceph-fuse": true, "glusterfs": true, "sshfs": true, "s3fs": true,
	"gcsfuse": true, "rclone": true, "juicefs": true, "goofys": true,
	"cvmfs2": true, "mount-s3": true, "davfs": true,
}

// IsNetworkFS reports whether fstype (as in Mount.FSType) is a network or
// cluster filesystem, including FUSE mounts of well-known network clients
// such as "fuse.ceph-fuse".
func IsNetworkFS(fstype string) bool {
	if sub, ok := strings.CutPrefix(fstype, "fuse."); ok {
		return networkFUSE[sub]
	}
	return networkFS[fstype]
}

// IsFUSE reports whether fstype is a FUSE filesystem: "fuse", "fuseblk" or
// "fuse.<subtype>". A FUSE mount hangs its callers for as long as its daemon
// is alive but stuck, and fails with "Transport endpoint is not connected"
// once the daemon is dead. "fusectl", the FUSE control filesystem, is not
// FUSE.
func IsFUSE(fstype string) bool {
	return fstype == "fuse" || fstype == "fuseblk" || strings.HasPrefix(fstype, "fuse.")
}

// IsBlockBacked reports whether m's filesystem sits on a block device: the
// source is a /dev/ path and the device number has a non-zero major (major 0
// is the kernel's anonymous devices: tmpfs, overlay, NFS). btrfs is the
// exception: it reports an anonymous device number even though its source is
// a real disk, so it is recognised by type. rbd, nbd and iSCSI devices are
// block devices whose I/O goes over the network.
func IsBlockBacked(m Mount) bool {
	if !strings.HasPrefix(m.Source, "/dev/") {
		return false
	}
	return m.Major != 0 || m.FSType == "btrfs"
}

// pseudoFS hold no user data: the kernel synthesises their contents, so
// touching them cannot wait on a disk or a server.
//
// tmpfs and ramfs are deliberately not pseudo: tmpfs holds real files (Kubernetes secret, configmap and memory-backed
// emptyDir volumes live on it), a process can hold one busy exactly like a
// disk mount, and dirshape must be able to count what is in it.
//
// autofs deliberately is pseudo: the autofs mount holds no data, and
// stat()ing a direct-map trigger would mount whatever is behind it (usually
// NFS), a side effect a diagnostic tool must not cause. Once mounted, the
// real filesystem has its own mountinfo line and its own class.
var pseudoFS = map[string]bool{
	"proc": true, "sysfs": true, "devtmpfs": true, "devpts": true,
	"mqueue": true, "debugfs": true, "tracefs": true, "securityfs": true,
	"pstore": true, "bpf": true, "configfs": true, "fusectl": true,
	"hugetlbfs": true, "nsfs": true, "binfmt_misc": true, "autofs": true,
	"rpc_pipefs": true, "nfsd": true, "selinuxfs": true, "efivarfs": true,
	"cpuset": true, "resctrl": true, "binder": true, "binderfs": true,
	"xenfs": true,
}

// IsPseudoFS reports whether fstype is a kernel pseudo filesystem (proc,
// sysfs, cgroup and cgroup2, devpts, autofs, ...). tmpfs is not one; see
// pseudoFS for why.
func IsPseudoFS(fstype string) bool {
	return pseudoFS[fstype] || strings.HasPrefix(fstype, "cgroup")
}

// FSClass ranks a mount by how likely touching it is to hang. Classes are
// ordered: probing mounts in ascending FSClass reaches the dangerous ones
// first, while the run's time budget is fresh.
type FSClass int

const (
	// ClassNetwork is a network or cluster filesystem (IsNetworkFS).
	ClassNetwork FSClass = iota
	// ClassFUSE is any other FUSE filesystem (IsFUSE).
	ClassFUSE
	// ClassBlock is a filesystem on a block device (IsBlockBacked); rbd,
	// nbd and iSCSI disks hang like network filesystems when their
	// transport does.
	ClassBlock
	// ClassOther is everything else that holds data: overlay, tmpfs,
	// zfs, squashfs, ...
	ClassOther
	// ClassPseudo is a kernel pseudo filesystem (IsPseudoFS).
	ClassPseudo
)

// String returns the class name used in reports.
func (c FSClass) String() string {
	switch c {
	case ClassNetwork:
		return "network"
	case ClassFUSE:
		return "fuse"
	case ClassBlock:
		return "block"
	case ClassOther:
		return "other"
	case ClassPseudo:
		return "pseudo"
	}
	return "unknown"
}

// Classify returns m's FSClass. A FUSE mount of a network client is
// ClassNetwork; fuseblk (FUSE on a local disk, e.g. ntfs-3g) is ClassFUSE,
// since its daemon is what can hang.
func Classify(m Mount) FSClass {
	switch {
	case IsNetworkFS(m.FSType):
		return ClassNetwork
	case IsFUSE(m.FSType):
		return ClassFUSE
	case IsBlockBacked(m):
		return ClassBlock
	case IsPseudoFS(m.FSType):
		return ClassPseudo
	}
	return ClassOther
}
