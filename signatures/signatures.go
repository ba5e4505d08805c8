// Package signatures is the catalogue of log signatures nodesnap reads
// node logs with: which lines of the kubelet, the container runtimes, the
// CSI drivers and the kernel name storage or pod-lifecycle trouble, what
// each means, and which object (pod, volume, device, path, server) it
// names. analyze and watch both match lines with it.
//
// The catalogue has two halves. Classes (classes.go) are our knowledge: a
// short hand-kept list keyed by each message's stable words. Formats
// (table_gen.go) are the upstream format strings those words were taken
// from, extracted from the source of every kubelet minor from 1.10 on,
// the runtimes and the CSI drivers by signatures/internal/extract (make
// signatures), with the versions each applies to: the tests render every
// one into log lines in each log format and check the class it falls in.
//
// The package is a leaf: it imports nothing of nodesnap.
package signatures

// Format is one upstream format string: of a log call, an error that ends
// up logged, or an event.
type Format struct {
	// Class is the ID of the class the format belongs to.
	Class string
	// Source is the component ("kubelet", "containerd", "ceph-csi", ...).
	Source string
	// Versions are the versions of the source that have the format, as
	// runs ("1.10-1.19,1.22").
	Versions string
	// Kind is "log", "error" or "event".
	Kind string
	// Keys are the key names of a structured call (InfoS, ErrorS), comma
	// separated.
	Keys string
	// Format is the format string or message.
	Format string
}

// KeyKind says which object a class's key is.
type KeyKind string

// Kinds of keys.
const (
	KeyNone   KeyKind = ""
	KeyPod    KeyKind = "pod"    // a pod's UID, else its namespace/name
	KeyVolume KeyKind = "volume" // the volume's unique name, name or CSI volume ID
	KeyDevice KeyKind = "device" // a block device (/dev/rbd0), else the volume
	KeyPath   KeyKind = "path"   // a directory or mount point
	KeyServer KeyKind = "server" // an NFS server, a ceph monitor
	KeyTask   KeyKind = "task"   // a kernel task comm:pid
	KeyText   KeyKind = "text"   // free text (decoded command output)
)

// Objects are what a line names, each "" when it does not.
type Objects struct {
	PodUID string
	// Pod is "namespace/name".
	Pod    string
	Volume string
	Device string
	Path   string
	Server string
	Task   string
}

// Match is one class a line falls in, with its key and every object the
// line names.
type Match struct {
	ID string
	// Key is the object the class is keyed by ("" when the line does not
	// name it).
	Key string
	Objects
}
