// Package shared holds what more than one collector uses: scanning /proc
// in parallel, the host's mount namespace, block devices, streamed JSON,
// byte-size flags. A collector's own helpers stay in its package.
package shared

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/collectors/hostfs"
	"github.com/nodesnap/nodesnap/internal/cliflag"
)

func BootTime(env *collectors.Env) time.Time {
	b, err := hostfs.ReadProc(env.ProcPath("stat"), nil)
	if err != nil {
		return time.Time{}
	}
	for _, l := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(l, []byte("btime ")); ok {
			if s, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64); err == nil {
				return time.Unix(s, 0)
			}
		}
	}
	return time.Time{}
}

// ByteSize is a byte-size flag value above 0 (cliflag.ParseBytes):
// 1048576, 512KiB, 32MiB, 1GiB.
type ByteSize int64

func (s *ByteSize) String() string { return cliflag.FormatBytes(int64(*s)) }

// Type is the flag's kind in help.
func (s *ByteSize) Type() string { return "size" }

// Set parses a size.
func (s *ByteSize) Set(v string) error {
	n, err := ParseByteSize(v)
	if err != nil {
		return err
	}
	*s = ByteSize(n)
	return nil
}

// ParseByteSize parses a size above 0.
func ParseByteSize(v string) (int64, error) {
	n, err := cliflag.ParseBytes(v)
	if err == nil && n == 0 {
		err = fmt.Errorf("%q: the size must be above 0", v)
	}
	return n, err
}

func Millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// FSMagic names the statfs f_type values most often seen on nodes.
var FSMagic = map[int64]string{
	0xEF53: "ext2/3/4", 0x58465342: "xfs", 0x9123683E: "btrfs", 0x01021994: "tmpfs",
	0x794C7630: "overlay", 0x6969: "nfs", 0x65735546: "fuse", 0x00C36400: "ceph",
	0xFF534D42: "cifs", 0xFE534D42: "smb2", 0x9FA0: "proc", 0x62656572: "sysfs",
	0x63677270: "cgroup2", 0x27E0EB: "cgroup", 0x1CD1: "devpts", 0x73717368: "squashfs",
	0x2FC12FC1: "zfs", 0x858458F6: "ramfs", 0x6E736673: "nsfs", 0x19800202: "mqueue",
	0xCAFE4A11: "bpf", 0x74726163: "tracefs", 0x64626720: "debugfs",
}

// HostNamespace returns the host's mount namespace: pid 1's, or when
// that cannot be read (a sandbox that hides its init), kthreadd's (pid 2):
// kernel threads live in the initial mount namespace, which is pid 1's on
// any ordinary host.
func HostNamespace(env *collectors.Env) (uint64, error) {
	ns, err := hostfs.NSInode(env.ProcPath("1", "ns", "mnt"))
	if err == nil {
		return ns, nil
	}
	if ns2, err2 := hostfs.NSInode(env.ProcPath("2", "ns", "mnt")); err2 == nil && isKthreadd(env.ProcPath("2")) {
		return ns2, nil
	}
	return 0, fmt.Errorf("cannot tell the host's mount namespace: %w", err)
}

// isKthreadd reports whether the process at dir is kthreadd.
func isKthreadd(dir string) bool {
	return hostfs.ReadComm(dir+"/comm") == "kthreadd"
}

// Gone reports whether err means the process or task went away while being
// read (an ordinary race, not worth a note).
func Gone(err error) bool {
	return errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ESRCH)
}

// MaxNSCandidates bounds the tasks remembered per namespace for reading
// its mountinfo: the first one nearly always works.
const MaxNSCandidates = 16

// Parallel calls fn(i) for i in [0, n) on up to workers goroutines,
// stopping early when ctx ends.
func Parallel(ctx context.Context, n, workers int, fn func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < min(workers, n); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				fn(i)
			}
		}()
	}
	wg.Wait()
}

// BlockCache reads sysfs facts about block devices once each.
type BlockCache struct {
	sys   string
	byDev map[[2]uint32]*layout.BlockDevice
	// byName maps a kernel name (loop3) to its device, filled by
	// lookupName.
	byName map[string]*nameEntry
}

type nameEntry struct {
	major, minor uint32
	ok           bool
}

func NewBlockCache(sys string) *BlockCache {
	return &BlockCache{sys: sys, byDev: map[[2]uint32]*layout.BlockDevice{}, byName: map[string]*nameEntry{}}
}

// lookup returns sysfs facts for a block device, or nil when major:minor
// is not a block device (major 0 is the kernel's anonymous devices: tmpfs,
// overlay, nfs, fuse...). sysfs attributes are kernel memory: reading
// them touches no filesystem that can hang.
func (c *BlockCache) Lookup(major, minor uint32) *layout.BlockDevice {
	if major == 0 {
		return nil
	}
	k := [2]uint32{major, minor}
	if b, ok := c.byDev[k]; ok {
		return b
	}
	dir := c.sys + "/dev/block/" + strconv.FormatUint(uint64(major), 10) + ":" + strconv.FormatUint(uint64(minor), 10)
	b := readBlockDevice(c.sys, dir)
	c.byDev[k] = b
	return b
}

// lookupName returns the device number of /dev/<name> when name is a block
// device the kernel knows (from /sys/class/block/<name>/dev).
func (c *BlockCache) LookupName(name string) (uint32, uint32, bool) {
	if name == "" || strings.Contains(name, "/") || name == "." || name == ".." {
		return 0, 0, false
	}
	if e, ok := c.byName[name]; ok {
		return e.major, e.minor, e.ok
	}
	e := &nameEntry{}
	c.byName[name] = e
	var buf [64]byte
	b, err := hostfs.ReadSmall(c.sys+"/class/block/"+name+"/dev", buf[:])
	if err != nil {
		return 0, 0, false
	}
	maj, mnr, ok := strings.Cut(strings.TrimSpace(string(b)), ":")
	a, err1 := strconv.ParseUint(maj, 10, 32)
	z, err2 := strconv.ParseUint(mnr, 10, 32)
	if !ok || err1 != nil || err2 != nil {
		return 0, 0, false
	}
	e.major, e.minor, e.ok = uint32(a), uint32(z), true
	return e.major, e.minor, true
}

func readBlockDevice(sys, dir string) *layout.BlockDevice {
	var buf [4096]byte
	read := func(name string) string {
		b, err := hostfs.ReadSmall(dir+"/"+name, buf[:])
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	uevent := read("uevent")
	if uevent == "" {
		return nil
	}
	b := &layout.BlockDevice{}
	for _, line := range strings.Split(uevent, "\n") {
		k, v, _ := strings.Cut(line, "=")
		switch k {
		case "DEVNAME":
			b.Name = v
		case "PARTN":
			b.Partition, _ = strconv.Atoi(v)
		}
	}
	switch {
	case strings.HasPrefix(b.Name, "loop"):
		b.BackingFile = read("loop/backing_file")
	case strings.HasPrefix(b.Name, "dm-"):
		b.DMName = read("dm/name")
		b.DMUUID = read("dm/uuid")
	case strings.HasPrefix(b.Name, "nbd"):
		b.NBDPid, _ = strconv.Atoi(read("pid"))
	case strings.HasPrefix(b.Name, "rbd") && b.Partition == 0:
		// /sys/bus/rbd/devices/<id>/ for /dev/rbd<id>.
		if id := strings.TrimPrefix(b.Name, "rbd"); id != "" && strings.Trim(id, "0123456789") == "" {
			rbd := sys + "/bus/rbd/devices/" + id + "/"
			if p, err := hostfs.ReadSmall(rbd+"pool", buf[:]); err == nil {
				b.RBDPool = strings.TrimSpace(string(p))
			}
			if p, err := hostfs.ReadSmall(rbd+"name", buf[:]); err == nil {
				b.RBDImage = strings.TrimSpace(string(p))
			}
		}
	}
	return b
}

// JSONArray is an array field written one element per line.
type JSONArray struct {
	Name string
	N    int
	Elem func(i int) any
}

// WriteJSONLines writes the object head (whose long arrays are hidden by
// shadowing fields) followed by arrays, one element per line.
func WriteJSONLines(env *collectors.Env, name string, head any, arrays ...JSONArray) error {
	f, err := env.Create(name)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 64<<10)
	j := &JSONWriter{W: w}
	j.Object(head)
	for _, a := range arrays {
		j.Str(`,"` + a.Name + `":[`)
		for i := 0; i < a.N; i++ {
			j.Sep(i)
			j.Value(a.Elem(i))
		}
		j.Str("\n]")
	}
	j.Str("}\n")
	werr := j.Err
	if err := w.Flush(); werr == nil {
		werr = err
	}
	if err := f.Close(); werr == nil {
		werr = err
	}
	if werr != nil {
		return fmt.Errorf("writing %s: %w", name, werr)
	}
	return nil
}

// NonNil is s, or an empty slice for nil (JSON [] rather than null).
func NonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// JSONWriter writes JSON pieces, keeping the first error.
type JSONWriter struct {
	W   io.Writer
	Err error
}

func (j *JSONWriter) Str(s string) {
	if j.Err == nil {
		_, j.Err = io.WriteString(j.W, s)
	}
}

// Bytes writes b, already encoded.
func (j *JSONWriter) Bytes(b []byte) {
	if j.Err == nil {
		_, j.Err = j.W.Write(b)
	}
}

func (j *JSONWriter) Value(v any) {
	if j.Err != nil {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		j.Err = err
		return
	}
	_, j.Err = j.W.Write(b)
}

// object writes v, an object, without its closing brace, so that fields
// can follow.
func (j *JSONWriter) Object(v any) {
	if j.Err != nil {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		j.Err = err
		return
	}
	if len(b) < 2 || b[len(b)-1] != '}' {
		j.Err = fmt.Errorf("internal error: %T is not a JSON object", v)
		return
	}
	b = b[:len(b)-1]
	if len(b) == 1 {
		// An empty object: the next field must not start with a comma.
		j.Err = fmt.Errorf("internal error: %T has no fields", v)
		return
	}
	_, j.Err = j.W.Write(b)
}

// sep starts the i-th element of an array on a new line.
func (j *JSONWriter) Sep(i int) {
	if i > 0 {
		j.Str(",\n")
	} else {
		j.Str("\n")
	}
}
