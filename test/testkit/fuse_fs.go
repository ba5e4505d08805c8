package testkit

import (
	"context"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// The filesystem the test FUSE mounts serve: every operation waits at a gate
// that Hang closes, and the tree of files it serves while it answers.

// gate blocks requests once hung is set, until release is closed.
type gate struct {
	hung        atomic.Bool
	hungAtStart bool
	blocked     atomic.Int64
	release     chan struct{}
	releaseOnce sync.Once
	// resumed: released requests are served, not failed.
	resumed atomic.Bool
}

// wait blocks if the mount is hung and reports whether it did.
func (g *gate) wait() bool {
	if !g.hung.Load() {
		return false
	}
	g.blocked.Add(1)
	<-g.release
	g.blocked.Add(-1)
	return !g.resumed.Load()
}

func (g *gate) releaseAll() { g.releaseOnce.Do(func() { close(g.release) }) }

// hungFS wraps the served tree and blocks every request that expects a
// reply while the gate is hung. Forget, Init and OnUnmount pass through.
type hungFS struct {
	fuse.RawFileSystem
	g *gate
}

func (h *hungFS) String() string { return "nodesnap-testkit" }

func (h *hungFS) Lookup(c <-chan struct{}, hd *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	if h.g.wait() {
		return fuse.EIO
	}
	return h.RawFileSystem.Lookup(c, hd, name, out)
}

func (h *hungFS) GetAttr(c <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	if h.g.wait() {
		return fuse.EIO
	}
	return h.RawFileSystem.GetAttr(c, in, out)
}

func (h *hungFS) SetAttr(c <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	if h.g.wait() {
		return fuse.EIO
	}
	return h.RawFileSystem.SetAttr(c, in, out)
}

func (h *hungFS) Mknod(c <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	if h.g.wait() {
		return fuse.EIO
	}
	return h.RawFileSystem.Mknod(c, in, name, out)
}

func (h *hungFS) Mkdir(c <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	if h.g.wait() {
		return fuse.EIO
	}
	return h.RawFileSystem.Mkdir(c, in, name, out)
}

func (h *hungFS) Unlink(c <-chan struct{}, hd *fuse.InHeader, name string) fuse.Status {
	if h.g.wait() {
		return fuse.EIO
	}
	return h.RawFileSystem.Unlink(c, hd, name)
}

func (h *hungFS) Rmdir(c <-chan struct{}, hd *fuse.InHeader, name string) fuse.Status {
	if h.g.wait() {
		return fuse.EIO
	}
	return h.RawFileSystem.Rmdir(c, hd, name)
}

func (h *hungFS) Rename(c <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	if h.g.wait() {
		return fuse.EIO
	}
	return h.RawFileSystem.Rename(c, in, oldName, newName)
}

func (h *hungFS) Link(c <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	if h.g.wait() {
		return fuse.EIO
	}
	return h.RawFileSystem.Link(c, in, name, out)
}

func (h *hungFS) Symlink(c <-chan struct{}, hd *fuse.InHeader, to, name string, out *fuse.EntryOut) fuse.Status {
	if h.g.wait() {
		return fuse.EIO
	}
	return h.RawFileSystem.Symlink(c, hd, to, name, out)
}

func (h *hungFS) Readlink(c <-chan struct{}, hd *fuse.InHeader) ([]byte, fuse.Status) {
	if h.g.wait() {
		return nil, fuse.EIO
	}
	return h.RawFileSystem.Readlink(c, hd)
}

func (h *hungFS) Access(c <-chan struct{}, in *fuse.AccessIn) fuse.Status {
	if h.g.wait() {
		return fuse.EIO
	}
	return h.RawFileSystem.Access(c, in)
}

func (h *hungFS) GetXAttr(c <-chan struct{}, hd *fuse.InHeader, attr string, dest []byte) (uint32, fuse.Status) {
	if h.g.wait() {
		return 0, fuse.EIO
	}
	return h.RawFileSystem.GetXAttr(c, hd, attr, dest)
}

func (h *hungFS) ListXAttr(c <-chan struct{}, hd *fuse.InHeader, dest []byte) (uint32, fuse.Status) {
	if h.g.wait() {
		return 0, fuse.EIO
	}
	return h.RawFileSystem.ListXAttr(c, hd, dest)
}

func (h *hungFS) SetXAttr(c <-chan struct{}, in *fuse.SetXAttrIn, attr string, data []byte) fuse.Status {
	if h.g.wait() {
		return fuse.EIO
	}
	return h.RawFileSystem.SetXAttr(c, in, attr, data)
}

func (h *hungFS) RemoveXAttr(c <-chan struct{}, hd *fuse.InHeader, attr string) fuse.Status {
	if h.g.wait() {
		return fuse.EIO
	}
	return h.RawFileSystem.RemoveXAttr(c, hd, attr)
}

func (h *hungFS) Create(c <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	if h.g.wait() {
		return fuse.EIO
	}
	return h.RawFileSystem.Create(c, in, name, out)
}

func (h *hungFS) Tmpfile(c <-chan struct{}, in *fuse.CreateIn, out *fuse.CreateOut) fuse.Status {
	if h.g.wait() {
		return fuse.EIO
	}
	return h.RawFileSystem.Tmpfile(c, in, out)
}

func (h *hungFS) Open(c <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	if h.g.wait() {
		return fuse.EIO
	}
	return h.RawFileSystem.Open(c, in, out)
}

func (h *hungFS) Read(c <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	if h.g.wait() {
		return nil, fuse.EIO
	}
	return h.RawFileSystem.Read(c, in, buf)
}

func (h *hungFS) Lseek(c <-chan struct{}, in *fuse.LseekIn, out *fuse.LseekOut) fuse.Status {
	if h.g.wait() {
		return fuse.EIO
	}
	return h.RawFileSystem.Lseek(c, in, out)
}

func (h *hungFS) GetLk(c <-chan struct{}, in *fuse.LkIn, out *fuse.LkOut) fuse.Status {
	if h.g.wait() {
		return fuse.EIO
	}
	return h.RawFileSystem.GetLk(c, in, out)
}

func (h *hungFS) SetLk(c <-chan struct{}, in *fuse.LkIn) fuse.Status {
	if h.g.wait() {
		return fuse.EIO
	}
	return h.RawFileSystem.SetLk(c, in)
}

func (h *hungFS) SetLkw(c <-chan struct{}, in *fuse.LkIn) fuse.Status {
	if h.g.wait() {
		return fuse.EIO
	}
	return h.RawFileSystem.SetLkw(c, in)
}

func (h *hungFS) Release(c <-chan struct{}, in *fuse.ReleaseIn) {
	if h.g.wait() {
		return
	}
	h.RawFileSystem.Release(c, in)
}

func (h *hungFS) Write(c <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	if h.g.wait() {
		return 0, fuse.EIO
	}
	return h.RawFileSystem.Write(c, in, data)
}

func (h *hungFS) Writev(c <-chan struct{}, in *fuse.WriteIn, data [][]byte) (uint32, fuse.Status) {
	if h.g.wait() {
		return 0, fuse.EIO
	}
	return h.RawFileSystem.Writev(c, in, data)
}

func (h *hungFS) CopyFileRange(c <-chan struct{}, in *fuse.CopyFileRangeIn) (uint32, fuse.Status) {
	if h.g.wait() {
		return 0, fuse.EIO
	}
	return h.RawFileSystem.CopyFileRange(c, in)
}

func (h *hungFS) Ioctl(c <-chan struct{}, in *fuse.IoctlIn, inbuf []byte, out *fuse.IoctlOut, outbuf []byte) fuse.Status {
	if h.g.wait() {
		return fuse.EIO
	}
	return h.RawFileSystem.Ioctl(c, in, inbuf, out, outbuf)
}

func (h *hungFS) Flush(c <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	if h.g.wait() {
		return fuse.EIO
	}
	return h.RawFileSystem.Flush(c, in)
}

func (h *hungFS) Fsync(c <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	if h.g.wait() {
		return fuse.EIO
	}
	return h.RawFileSystem.Fsync(c, in)
}

func (h *hungFS) Fallocate(c <-chan struct{}, in *fuse.FallocateIn) fuse.Status {
	if h.g.wait() {
		return fuse.EIO
	}
	return h.RawFileSystem.Fallocate(c, in)
}

func (h *hungFS) OpenDir(c <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	if h.g.wait() {
		return fuse.EIO
	}
	return h.RawFileSystem.OpenDir(c, in, out)
}

func (h *hungFS) ReadDir(c <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	if h.g.wait() {
		return fuse.EIO
	}
	return h.RawFileSystem.ReadDir(c, in, out)
}

func (h *hungFS) ReadDirPlus(c <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	if h.g.wait() {
		return fuse.EIO
	}
	return h.RawFileSystem.ReadDirPlus(c, in, out)
}

func (h *hungFS) ReleaseDir(in *fuse.ReleaseIn) {
	if h.g.wait() {
		return
	}
	h.RawFileSystem.ReleaseDir(in)
}

func (h *hungFS) FsyncDir(c <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	if h.g.wait() {
		return fuse.EIO
	}
	return h.RawFileSystem.FsyncDir(c, in)
}

func (h *hungFS) StatFs(c <-chan struct{}, hd *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	if h.g.wait() {
		return fuse.EIO
	}
	return h.RawFileSystem.StatFs(c, hd, out)
}

func (h *hungFS) Statx(c <-chan struct{}, in *fuse.StatxIn, out *fuse.StatxOut) fuse.Status {
	if h.g.wait() {
		return fuse.EIO
	}
	return h.RawFileSystem.Statx(c, in, out)
}

// treeRoot is the root of the served tree; it builds the tree from the
// files map when the filesystem is created.
type treeRoot struct {
	fs.Inode
	files map[string]string
}

var _ fs.NodeOnAdder = (*treeRoot)(nil)

func (r *treeRoot) OnAdd(ctx context.Context) {
	paths := make([]string, 0, len(r.files))
	for p := range r.files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		isDir := strings.HasSuffix(p, "/")
		parts := strings.Split(strings.Trim(p, "/"), "/")
		dir := &r.Inode
		for i, name := range parts {
			if name == "" || name == "." || name == ".." {
				continue
			}
			if i == len(parts)-1 && !isDir {
				file := &fs.MemRegularFile{Data: []byte(r.files[p]), Attr: fuse.Attr{Mode: 0o644}}
				dir.AddChild(name, dir.NewPersistentInode(ctx, file, fs.StableAttr{Mode: syscall.S_IFREG}), true)
				break
			}
			child := dir.GetChild(name)
			if child == nil {
				child = dir.NewPersistentInode(ctx, &fs.Inode{}, fs.StableAttr{Mode: syscall.S_IFDIR})
				dir.AddChild(name, child, false)
			}
			dir = child
		}
	}
}
