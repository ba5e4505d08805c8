package storageclients

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/engine/isolate"
)

// Worker operations. Every read of /proc, /sys or debugfs this collector
// makes runs in one of them, in a worker of the isolation layer under the
// probe deadline: sysfs and debugfs files of a storage client can block
// on a lock its stuck thread holds (ceph's mdsc takes the MDS client's
// mutex), and reading another process's /proc files can wait on its
// locks. A read that blocks is recorded as a hang with its kernel stack.

const (
	opRead     = "storageclients.read"
	opKernelFS = "storageclients.kernelfs"
	opTasks    = "storageclients.tasks"
)

// Magic numbers of the pseudo filesystems read here (include/uapi/linux/magic.h).
const (
	debugfsMagic = 0x64626720
	fusectlMagic = 0x65735543
)

// maxFile bounds one file read by these ops.
const maxFile = 256 << 10

// ReadRequest reads small files, lists directories and reads links, all
// relative to Base (a pseudo filesystem's directory).
type ReadRequest struct {
	Base  string   `json:"base"`
	Files []string `json:"files,omitempty"`
	Links []string `json:"links,omitempty"`
	Lists []string `json:"lists,omitempty"`
	Max   int64    `json:"max,omitempty"`
}

// ReadResult holds what ReadRequest asked for; a missing file or
// directory is in Errs, keyed like the request.
type ReadResult struct {
	Files map[string][]byte   `json:"files,omitempty"`
	Links map[string]string   `json:"links,omitempty"`
	Lists map[string][]string `json:"lists,omitempty"`
	Errs  map[string]string   `json:"errs,omitempty"`
	// Mounted says how a kernel filesystem was reached (opKernelFS).
	Mounted string `json:"mounted,omitempty"`
}

// KernelFSRequest is a ReadRequest on a kernel pseudo filesystem that may
// not be mounted: Dir is where it normally is (Base is relative to it).
type KernelFSRequest struct {
	FSType string      `json:"fstype"`
	Magic  int64       `json:"magic"`
	Dir    string      `json:"dir"`
	Read   ReadRequest `json:"read"`
}

func init() {
	isolate.RegisterOp(opRead, isolate.Typed(func(rq ReadRequest) (any, error) { return doRead(rq), nil }))
	isolate.RegisterOp(opKernelFS, isolate.Typed(kernelFSOp))
	isolate.RegisterOp(opTasks, isolate.Typed(tasksOp))
}

func doRead(rq ReadRequest) ReadResult {
	max := rq.Max
	if max <= 0 || max > maxFile {
		max = maxFile
	}
	r := ReadResult{}
	fail := func(k string, err error) {
		if r.Errs == nil {
			r.Errs = map[string]string{}
		}
		r.Errs[k] = err.Error()
	}
	for _, f := range rq.Files {
		res, err := isolate.ReadFileLimited(filepath.Join(rq.Base, f), max)
		if err != nil {
			fail(f, err)
			continue
		}
		if r.Files == nil {
			r.Files = map[string][]byte{}
		}
		r.Files[f] = res.Data
	}
	for _, l := range rq.Links {
		t, err := os.Readlink(filepath.Join(rq.Base, l))
		if err != nil {
			fail(l, err)
			continue
		}
		if r.Links == nil {
			r.Links = map[string]string{}
		}
		r.Links[l] = t
	}
	for _, d := range rq.Lists {
		es, err := os.ReadDir(filepath.Join(rq.Base, d))
		if err != nil {
			fail(d, err)
			continue
		}
		names := make([]string, 0, len(es))
		for i, e := range es {
			if i >= maxRecords {
				break
			}
			names = append(names, e.Name())
		}
		sort.Strings(names)
		if r.Lists == nil {
			r.Lists = map[string][]string{}
		}
		r.Lists[d] = names
	}
	return r
}

// kernelFSOp reads a kernel pseudo filesystem (debugfs, fusectl) at its
// usual place. When it is not mounted there, the thread serving the item
// moves to a mount namespace of its own, mounts it there, reads, and then
// ends with the item: the host's mount table never sees the mount.
func kernelFSOp(rq KernelFSRequest) (any, error) {
	var st unix.Statfs_t
	mounted := "mounted"
	if err := unix.Statfs(rq.Dir, &st); err != nil || int64(st.Type) != rq.Magic {
		// The thread stays locked when the op returns, so the Go runtime
		// ends it instead of reusing it in the host's namespace.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			return nil, fmt.Errorf("%s is not mounted, and a private mount namespace to mount it in could not be made: %w", rq.FSType, err)
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			return nil, fmt.Errorf("making the private mount namespace private: %w", err)
		}
		if err := unix.Mount(rq.FSType, rq.Dir, rq.FSType, unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			if errors.Is(err, unix.ENODEV) {
				// Not built into this kernel: nothing is missed.
				return ReadResult{Mounted: "absent: this kernel has no " + rq.FSType}, nil
			}
			return nil, fmt.Errorf("%s is not mounted and mounting it privately at %s failed: %w", rq.FSType, rq.Dir, err)
		}
		mounted = "private"
	}
	rq.Read.Base = filepath.Join(rq.Dir, rq.Read.Base)
	r := doRead(rq.Read)
	r.Mounted = mounted
	return r, nil
}

// errNotFD marks a syscall argument that is not an open descriptor.
var errNotFD = errors.New("not an open file descriptor")

// trimKernelPath drops a " (deleted)" suffix from a link target.
func trimKernelPath(s string) string { return strings.TrimSuffix(s, " (deleted)") }
