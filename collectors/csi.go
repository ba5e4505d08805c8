package collectors

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/collectors/procfs"
	"github.com/nodesnap/nodesnap/isolate"
)

// The csi collector gathers the CSI state a human would read when a volume
// will not go away (incident 004): the drivers' own state files, the
// kubelet's plugin directories, each pod volume's vol_data.json, which of
// the volumes' mount paths are mounted — taken from the mount table, never
// by stat()ing the mount path — and the newest logs of the CSI driver
// pods' containers (what `kubectl logs` and `kubectl logs --previous`
// would show). Every listing and read is one item in an isolated worker: a
// plugin directory on a hung mount costs one probe.

func init() {
	Register(Spec{
		Name:           "csi",
		Description:    "CSI driver state files, kubelet plugins and plugins_registry, every pod volume's vol_data.json, the pod → volume → mount inventory, and the newest container logs of the CSI driver pods (current and previous instance)",
		DefaultEnabled: true,
		DefaultTimeout: 40 * time.Second,
		After:          []string{"mountprobe"},
		Options:        &csiOpts,
		Flags:          csiFlags,
		Run:            collectCSI,
	})
	isolate.RegisterOp(opCSIReadDir, isolate.Typed(csiReadDirOp))
	isolate.RegisterOp(opCSIGlob, isolate.Typed(csiGlobOp))
}

// CSIOptions are the csi collector's flags. Paths are host paths.
type CSIOptions struct {
	StateGlobs []string `json:"state_globs"`
	KubeletDir string   `json:"kubelet_dir"`
	// MaxEntries bounds every listing (pods, plugin trees).
	MaxEntries int `json:"max_entries"`
	// PodLogDir is the kubelet's pod log root; PodLogBytes the newest
	// bytes kept of each CSI container's logs.
	PodLogDir   string `json:"pod_log_dir"`
	PodLogBytes int64  `json:"pod_log_bytes"`
}

// Defaults of the csi collector's pod logs.
const (
	DefaultCSIPodLogDir   = "/var/log/pods"
	DefaultCSIPodLogBytes = 2 << 20
)

var csiOpts CSIOptions

// DefaultCSIStateGlobs are state files of drivers known to keep one.
var DefaultCSIStateGlobs = []string{
	// csi-driver-host-path: its "Published" list lost on restart is
	// incident 004 (csi-driver-host-path#457).
	"/var/lib/csi-hostpath-data/state.json",
}

func csiFlags(fs *pflag.FlagSet) {
	o := &csiOpts
	*o = CSIOptions{}
	fs.StringSliceVar(&o.StateGlobs, "csi-state-glob", DefaultCSIStateGlobs, "csi: driver state files to keep and cross-check (globs, host paths; replaces the default list)")
	fs.StringVar(&o.KubeletDir, "csi-kubelet-dir", "/var/lib/kubelet", "csi: the kubelet's root directory (--root-dir of the kubelet)")
	fs.IntVar(&o.MaxEntries, "csi-max-entries", 5000, "csi: most directory entries listed per tree (pods, plugins)")
	fs.StringVar(&o.PodLogDir, "csi-pod-log-dir", DefaultCSIPodLogDir, "csi: the kubelet's pod log directory, where the CSI driver pods' container logs are read (host path)")
	o.PodLogBytes = DefaultCSIPodLogBytes
	fs.Var((*journalSize)(&o.PodLogBytes), "csi-pod-log-bytes", "csi: newest bytes kept of each CSI container's logs (its current instance first, then the one before its last restart)")
}

// CSIInventory is csi/inventory.json.
type CSIInventory struct {
	// KubeletDir is the kubelet's root (host path).
	KubeletDir string `json:"kubelet_dir"`
	// MountTable is the mountinfo the inventory was checked against;
	// MountTableError says why it could not be read (then every
	// "mounted" is null).
	MountTable      string `json:"mount_table"`
	MountTableError string `json:"mount_table_error,omitempty"`
	// PodVolumes are pods/<uid>/volumes/<plugin>/<volume>, every plugin.
	PodVolumes []CSIPodVolume `json:"pod_volumes"`
	// StagingVolumes are the CSI staging directories under
	// plugins/kubernetes.io/csi/ that hold a vol_data.json.
	StagingVolumes []CSIStagingVolume `json:"staging_volumes"`
	StateFiles     []CSIStateFile     `json:"state_files"`
	// Plugins and PluginsRegistry list plugins/ (a few levels deep, never
	// into a mountpoint) and plugins_registry/.
	Plugins         []CSIDirEntry `json:"plugins"`
	PluginsRegistry []CSIDirEntry `json:"plugins_registry"`
	// Findings are the cross-checks of state files, vol_data.json and the
	// mount table that found something wrong.
	Findings []CSIFinding `json:"findings"`
	// Drivers are the CSI drivers the kubelet knows (plugins_registry,
	// plugins, vol_data.json), used to find the drivers' pods.
	Drivers []string `json:"drivers,omitempty"`
	// PodLogDir is the kubelet's pod log directory (host path); PodLogs
	// the containers of CSI pods whose logs were kept, under podlogs/.
	PodLogDir string      `json:"pod_log_dir,omitempty"`
	PodLogs   []CSIPodLog `json:"pod_logs"`
	// Errors are listings or reads that failed (hung ones included).
	Errors []string `json:"errors,omitempty"`
}

// CSIDirEntry is one entry of a listing, typed from readdir's d_type
// (nothing is stat()ed).
type CSIDirEntry struct {
	// Path is the host path.
	Path string `json:"path"`
	// Type is dir, file, json (a regular *.json file), socket, symlink,
	// other or unknown.
	Type string `json:"type"`
	// Mountpoint is true when the mount table has a mount there; such
	// directories are never entered.
	Mountpoint bool `json:"mountpoint,omitempty"`
}

// CSIPodVolume is one volume directory of one pod.
type CSIPodVolume struct {
	PodUID string `json:"pod_uid"`
	// Plugin is the directory name, e.g. "kubernetes.io~csi".
	Plugin string `json:"plugin"`
	// Volume is the volume directory's name (the PV name for CSI).
	Volume string `json:"volume"`
	// Dir is the volume directory (host path).
	Dir string `json:"dir"`
	// MountPath is where the volume is expected to be mounted: Dir/mount
	// for CSI, Dir itself for other plugins.
	MountPath string `json:"mount_path"`
	// Mounted says whether MountPath is in the mount table (null when the
	// table could not be read).
	Mounted *bool `json:"mounted"`
	// Mounts are the mount table entries at MountPath (a volume mounted
	// twice shows twice).
	Mounts []CSIMountRef `json:"mounts,omitempty"`
	// DeletingLeftover marks a "<name>.deleting~<n>" directory left by a
	// failed teardown (incident 000).
	DeletingLeftover bool `json:"deleting_leftover,omitempty"`
	// VolData is the parsed vol_data.json of a CSI volume, VolDataFile its
	// copy in the bundle (relative to csi/), VolDataError why it could not
	// be read or parsed.
	VolData      *CSIVolData `json:"vol_data,omitempty"`
	VolDataFile  string      `json:"vol_data_file,omitempty"`
	VolDataError string      `json:"vol_data_error,omitempty"`
}

// CSIStagingVolume is one staging directory under plugins/kubernetes.io/csi.
type CSIStagingVolume struct {
	Dir             string        `json:"dir"`
	GlobalMountPath string        `json:"global_mount_path"`
	Mounted         *bool         `json:"mounted"`
	Mounts          []CSIMountRef `json:"mounts,omitempty"`
	VolData         *CSIVolData   `json:"vol_data,omitempty"`
	VolDataFile     string        `json:"vol_data_file,omitempty"`
	VolDataError    string        `json:"vol_data_error,omitempty"`
}

// CSIMountRef is the part of a mount table entry the inventory needs.
type CSIMountRef struct {
	MountID int    `json:"mount_id"`
	Dev     string `json:"dev"`
	Root    string `json:"root"`
	FSType  string `json:"fs_type"`
	Source  string `json:"source"`
}

// CSIVolData is the kubelet's vol_data.json of a CSI volume.
type CSIVolData struct {
	DriverName          string `json:"driver_name,omitempty"`
	VolumeHandle        string `json:"volume_handle,omitempty"`
	SpecVolID           string `json:"spec_vol_id,omitempty"`
	NodeName            string `json:"node_name,omitempty"`
	AttachmentID        string `json:"attachment_id,omitempty"`
	VolumeLifecycleMode string `json:"volume_lifecycle_mode,omitempty"`
}

// CSIStateFile is one driver state file.
type CSIStateFile struct {
	// Path is the host path; File its raw (redacted) copy in the bundle,
	// relative to csi/.
	Path      string `json:"path"`
	File      string `json:"file,omitempty"`
	Bytes     int    `json:"bytes"`
	Truncated bool   `json:"truncated,omitempty"`
	// Format is "csi-hostpath" (csi-driver-host-path's state.json),
	// "json" (JSON of an unknown layout) or "invalid".
	Format string `json:"format"`
	// ParseError says why an invalid file could not be parsed (cut short,
	// malformed): the raw copy is still in the bundle.
	ParseError string           `json:"parse_error,omitempty"`
	Volumes    []CSIStateVolume `json:"volumes,omitempty"`
	Snapshots  int              `json:"snapshots,omitempty"`
	// ReadError says why the file could not be read at all.
	ReadError string `json:"read_error,omitempty"`
}

// CSIStateVolume is one volume of a csi-hostpath state file, with what the
// mount table says about it.
type CSIStateVolume struct {
	VolID   string `json:"vol_id"`
	VolName string `json:"vol_name,omitempty"`
	VolPath string `json:"vol_path,omitempty"`
	NodeID  string `json:"node_id,omitempty"`
	Kind    string `json:"kind,omitempty"`
	// PublishedState is how the driver recorded the volume's publications:
	// "set" (a non-empty list), "empty" ([] or ""), "null", "false",
	// "missing", or "other".
	PublishedState string   `json:"published_state"`
	Published      []string `json:"published,omitempty"`
	StagedState    string   `json:"staged_state"`
	Staged         []string `json:"staged,omitempty"`
	// MountedTargets are target paths of this volume (from Published and
	// from pods' vol_data.json) that the mount table has.
	MountedTargets []string `json:"mounted_targets,omitempty"`
}

// CSIFinding is one inconsistency between a driver's state, the kubelet's
// vol_data.json and the mount table.
type CSIFinding struct {
	// Kind is "published-lost" (the driver does not think the volume is
	// published, yet its target is mounted: NodeUnpublishVolume will
	// return success without unmounting, incident 004) or
	// "published-not-mounted" (the driver thinks it is published, yet the
	// target is not mounted).
	Kind       string `json:"kind"`
	StateFile  string `json:"state_file"`
	VolumeID   string `json:"volume_id"`
	TargetPath string `json:"target_path"`
	PodUID     string `json:"pod_uid,omitempty"`
	Detail     string `json:"detail"`
}

// CSIPodLog is one container of a CSI pod, and what was kept of its logs.
type CSIPodLog struct {
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	PodUID    string `json:"pod_uid"`
	Container string `json:"container"`
	// Dir is the container's log directory (host path).
	Dir string `json:"dir"`
	// Match says why the pod was taken for a CSI pod.
	Match string `json:"match"`
	// Files are the container's log files, newest first, each with what
	// was kept of it or why nothing was.
	Files []CSIPodLogFile `json:"files"`
	// Bytes is what was kept over all files; Truncated says the current
	// and previous instance's logs hold more than that.
	Bytes     int64 `json:"bytes"`
	Truncated bool  `json:"truncated,omitempty"`
	// Error says why the directory could not be listed.
	Error string `json:"error,omitempty"`
}

// CSIPodLogFile is one log file of a container.
type CSIPodLogFile struct {
	// Name is the file's name in the container's log directory: "1.log",
	// a rotated "1.log.20240715-034930", a compressed "….gz".
	Name string `json:"name"`
	// Path is the host path.
	Path string `json:"path"`
	// Restart is the container instance the file belongs to (the
	// kubelet's restart count); Instance is "current", "previous" (the
	// one before the last restart) or "older".
	Restart    int    `json:"restart"`
	Instance   string `json:"instance"`
	Rotated    bool   `json:"rotated,omitempty"`
	Compressed bool   `json:"compressed,omitempty"`
	// File is the copy in the bundle, relative to csi/ (absent when
	// nothing was kept).
	File string `json:"file,omitempty"`
	// SourceBytes is the file's size when read; Bytes how many of its
	// last bytes were kept (whole lines, before redaction); Truncated says
	// its beginning was left out.
	SourceBytes int64 `json:"source_bytes,omitempty"`
	Bytes       int64 `json:"bytes"`
	Truncated   bool  `json:"truncated,omitempty"`
	// Skipped says why the file was not read; Error why reading it failed.
	Skipped string `json:"skipped,omitempty"`
	Error   string `json:"error,omitempty"`
}

// Worker ops.
const (
	opCSIReadDir = "csi.readdir"
	opCSIGlob    = "csi.glob"
)

// CSIReadDirRequest lists one directory, at most Max entries.
type CSIReadDirRequest struct {
	Path string `json:"path"`
	Max  int    `json:"max"`
}

// CSIReadDirResult holds names and d_types; Truncated when Max was hit.
type CSIReadDirResult struct {
	Entries   []CSIReadDirEntry `json:"entries"`
	Truncated bool              `json:"truncated,omitempty"`
}

// CSIReadDirEntry is one name with its d_type.
type CSIReadDirEntry struct {
	Name string `json:"name"`
	Type uint8  `json:"type"`
}

// csiReadDirOp reads one directory with getdents64 and keeps d_type as the
// kernel gave it. os.ReadDir would lstat() entries whose type is unknown,
// and an lstat of a mountpoint entry enters that mount.
func csiReadDirOp(rq CSIReadDirRequest) (any, error) {
	if rq.Max <= 0 {
		rq.Max = 10000
	}
	fd, err := unix.Open(rq.Path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", rq.Path, err)
	}
	defer unix.Close(fd)
	res := CSIReadDirResult{Entries: []CSIReadDirEntry{}}
	buf := make([]byte, 32<<10)
	for {
		n, err := unix.Getdents(fd, buf)
		if err != nil {
			return nil, fmt.Errorf("readdir %s: %w", rq.Path, err)
		}
		if n <= 0 {
			return res, nil
		}
		for _, e := range parseDirents(buf[:n]) {
			if e.Name == "." || e.Name == ".." {
				continue
			}
			if len(res.Entries) >= rq.Max {
				res.Truncated = true
				return res, nil
			}
			res.Entries = append(res.Entries, e)
		}
	}
}

// parseDirents decodes linux_dirent64 records: ino u64, off s64, reclen
// u16, type u8, NUL-terminated name.
func parseDirents(b []byte) []CSIReadDirEntry {
	var out []CSIReadDirEntry
	for len(b) >= 19 {
		reclen := int(binary.NativeEndian.Uint16(b[16:18]))
		if reclen < 19 || reclen > len(b) {
			break
		}
		name := b[19:reclen]
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		out = append(out, CSIReadDirEntry{Name: string(name), Type: b[18]})
		b = b[reclen:]
	}
	return out
}

// CSIGlobRequest expands one glob, at most Max matches.
type CSIGlobRequest struct {
	Pattern string `json:"pattern"`
	Max     int    `json:"max"`
}

func csiGlobOp(rq CSIGlobRequest) (any, error) {
	m, err := filepath.Glob(rq.Pattern)
	if err != nil {
		return nil, err
	}
	if rq.Max > 0 && len(m) > rq.Max {
		m = m[:rq.Max]
	}
	return m, nil
}

func csiTypeName(name string, t uint8) string {
	switch t {
	case unix.DT_DIR:
		return "dir"
	case unix.DT_REG:
		if strings.HasSuffix(name, ".json") {
			return "json"
		}
		return "file"
	case unix.DT_SOCK:
		return "socket"
	case unix.DT_LNK:
		return "symlink"
	case unix.DT_UNKNOWN:
		return "unknown"
	}
	return "other"
}

// csiMountTable indexes mountinfo by mount point.
type csiMountTable struct {
	byPoint map[string][]procfs.Mount
}

func (t *csiMountTable) at(p string) ([]CSIMountRef, *bool) {
	if t == nil {
		return nil, nil
	}
	ms := t.byPoint[path.Clean(p)]
	var refs []CSIMountRef
	for _, m := range ms {
		refs = append(refs, CSIMountRef{MountID: m.ID, Dev: m.Dev(), Root: m.Root, FSType: m.FSType, Source: m.Source})
	}
	mounted := len(ms) > 0
	return refs, &mounted
}

func (t *csiMountTable) isMountpoint(p string) bool {
	return t != nil && len(t.byPoint[path.Clean(p)]) > 0
}

// containing returns the innermost mount holding p, if any besides "/".
func (t *csiMountTable) containing(p string) (procfs.Mount, bool) {
	if t == nil {
		return procfs.Mount{}, false
	}
	for q := path.Clean(p); q != "/" && q != "."; q = path.Dir(q) {
		if ms := t.byPoint[q]; len(ms) > 0 {
			return ms[len(ms)-1], true
		}
	}
	return procfs.Mount{}, false
}

type csiRun struct {
	env   *Env
	opts  CSIOptions
	mt    *csiMountTable
	inv   *CSIInventory
	hung  []string // host paths whose listing or read hung
	files map[string]bool
}

func collectCSI(ctx context.Context, env *Env) error {
	var o CSIOptions
	if err := env.Options(&o); err != nil {
		return err
	}
	if o.KubeletDir == "" {
		o.KubeletDir = "/var/lib/kubelet"
	}
	if o.MaxEntries <= 0 {
		o.MaxEntries = 5000
	}
	if o.StateGlobs == nil {
		o.StateGlobs = DefaultCSIStateGlobs
	}
	if o.PodLogDir == "" {
		o.PodLogDir = DefaultCSIPodLogDir
	}
	if o.PodLogBytes <= 0 {
		o.PodLogBytes = DefaultCSIPodLogBytes
	}
	o.KubeletDir = path.Clean(o.KubeletDir)
	o.PodLogDir = path.Clean(o.PodLogDir)
	inv := &CSIInventory{KubeletDir: o.KubeletDir, PodVolumes: []CSIPodVolume{}, StagingVolumes: []CSIStagingVolume{},
		StateFiles: []CSIStateFile{}, Plugins: []CSIDirEntry{}, PluginsRegistry: []CSIDirEntry{}, Findings: []CSIFinding{},
		PodLogs: []CSIPodLog{}}
	c := &csiRun{env: env, opts: o, inv: inv, files: map[string]bool{}}

	var st isolate.StatResult
	kubeletFound := c.do(ctx, isolate.OpStat, o.KubeletDir, isolate.StatRequest{Path: env.HostPath(o.KubeletDir), Follow: true}, &st) == nil &&
		st.Mode&syscall.S_IFMT == syscall.S_IFDIR
	c.stateFiles(ctx)
	if !kubeletFound && len(inv.StateFiles) == 0 {
		_ = env.WriteJSON("inventory.json", inv)
		return fmt.Errorf("no kubelet directory at %s and no CSI state file matching %s: %w", o.KubeletDir, strings.Join(o.StateGlobs, ", "), ErrUnsupported)
	}

	// The host's mount table as pid 1 sees it: its mount points are host
	// paths, the same namespace the kubelet mounts volumes in.
	inv.MountTable = env.ProcPath("1", "mountinfo")
	if r, err := isolate.ReadFileLimited(inv.MountTable, 64<<20); err != nil {
		inv.MountTableError = err.Error()
		env.Partialf("cannot read the mount table %s: %v; whether volumes are mounted is unknown", inv.MountTable, err)
	} else {
		mounts, _ := procfs.ParseMountInfo(r.Data)
		c.mt = &csiMountTable{byPoint: map[string][]procfs.Mount{}}
		for _, m := range mounts {
			p := path.Clean(m.MountPoint)
			c.mt.byPoint[p] = append(c.mt.byPoint[p], m)
		}
	}

	if kubeletFound {
		inv.Plugins = c.walk(ctx, path.Join(o.KubeletDir, "plugins"), 5)
		inv.PluginsRegistry = c.walk(ctx, path.Join(o.KubeletDir, "plugins_registry"), 1)
		c.stagingVolumes(ctx)
		c.podVolumes(ctx)
	}
	c.crossCheck()
	for _, f := range inv.Findings {
		env.Notef("%s: %s", f.Kind, f.Detail)
	}
	// Last: the logs are the bulk of the bytes and the least structured
	// part; the inventory above must not wait for them.
	c.podLogs(ctx)
	if err := env.WriteJSON("inventory.json", inv); err != nil {
		return err
	}
	if len(c.hung) > 0 {
		env.Partialf("CSI paths that hung when listed or read were skipped (%d): %s", len(c.hung), strings.Join(c.hung, ", "))
	}
	return nil
}

// skip reports whether a host path must not be touched: it lies on a mount
// found hung this run, or under a path that hung in this collector.
func (c *csiRun) skip(p string) bool {
	if c.env.IsHung(p) || c.env.IsHung(c.env.HostPath(p)) {
		return true
	}
	for _, h := range c.hung {
		if p == h || strings.HasPrefix(p, h+"/") {
			return true
		}
	}
	return false
}

// do runs one worker op on a host path, remembering hangs: the mount
// holding a path that hung is reported (when it is a network or FUSE
// mount) so later collectors skip it too.
func (c *csiRun) do(ctx context.Context, op, hostPath string, req, resp any) error {
	if c.skip(hostPath) {
		return fmt.Errorf("%s: skipped, on a mount that hung earlier", hostPath)
	}
	err := c.env.Do(ctx, op, hostPath, req, resp)
	var he *isolate.HungError
	if errors.As(err, &he) {
		c.hung = append(c.hung, hostPath)
		if m, ok := c.mt.containing(hostPath); ok {
			if cl := procfs.Classify(m); cl == procfs.ClassNetwork || cl == procfs.ClassFUSE {
				// Both forms, as mountprobe does: later collectors may name
				// the path either way.
				c.env.ReportHungMount(m.MountPoint, he.Evidence)
				if hp := c.env.HostPath(m.MountPoint); hp != m.MountPoint {
					c.env.ReportHungMount(hp, he.Evidence)
				}
			}
		}
	}
	return err
}

func (c *csiRun) readDir(ctx context.Context, hostPath string, max int) ([]CSIReadDirEntry, error) {
	var r CSIReadDirResult
	p := c.env.HostPath(hostPath)
	if err := c.do(ctx, opCSIReadDir, hostPath, CSIReadDirRequest{Path: p, Max: max}, &r); err != nil {
		return nil, err
	}
	if r.Truncated {
		c.inv.Errors = append(c.inv.Errors, fmt.Sprintf("%s: more than %d entries; the rest were not listed", hostPath, max))
	}
	sort.Slice(r.Entries, func(i, j int) bool { return r.Entries[i].Name < r.Entries[j].Name })
	return r.Entries, nil
}

func (c *csiRun) readFile(ctx context.Context, hostPath string, max int64) (isolate.ReadFileResult, error) {
	var r isolate.ReadFileResult
	p := c.env.HostPath(hostPath)
	err := c.do(ctx, isolate.OpReadFile, hostPath, isolate.ReadFileRequest{Path: p, Max: max}, &r)
	return r, err
}

func csiNotExist(err error) bool {
	var oe *isolate.OpError
	return errors.As(err, &oe) && oe.Errno == syscall.ENOENT
}

// walk lists a tree breadth-first down to maxDepth levels, never entering
// a mountpoint, at most MaxEntries entries.
func (c *csiRun) walk(ctx context.Context, root string, maxDepth int) []CSIDirEntry {
	out := []CSIDirEntry{}
	type dir struct {
		p     string
		depth int
	}
	queue := []dir{{root, 1}}
	for len(queue) > 0 && len(out) < c.opts.MaxEntries && ctx.Err() == nil {
		d := queue[0]
		queue = queue[1:]
		entries, err := c.readDir(ctx, d.p, c.opts.MaxEntries-len(out))
		if err != nil {
			if !csiNotExist(err) || d.p != root {
				c.inv.Errors = append(c.inv.Errors, fmt.Sprintf("listing %s: %v", d.p, err))
			}
			continue
		}
		for _, e := range entries {
			p := path.Join(d.p, e.Name)
			de := CSIDirEntry{Path: p, Type: csiTypeName(e.Name, e.Type), Mountpoint: c.mt.isMountpoint(p)}
			out = append(out, de)
			if de.Type == "dir" && !de.Mountpoint && d.depth < maxDepth {
				queue = append(queue, dir{p, d.depth + 1})
			}
		}
	}
	return out
}

// stagingVolumes reads the vol_data.json files found under
// plugins/kubernetes.io/csi/ (CSI staging directories).
func (c *csiRun) stagingVolumes(ctx context.Context) {
	base := path.Join(c.opts.KubeletDir, "plugins", "kubernetes.io", "csi") + "/"
	for _, e := range c.inv.Plugins {
		if path.Base(e.Path) != "vol_data.json" || !strings.HasPrefix(e.Path, base) {
			continue
		}
		dir := path.Dir(e.Path)
		sv := CSIStagingVolume{Dir: dir, GlobalMountPath: path.Join(dir, "globalmount")}
		sv.Mounts, sv.Mounted = c.mt.at(sv.GlobalMountPath)
		rel := strings.TrimPrefix(dir, base)
		sv.VolData, sv.VolDataFile, sv.VolDataError = c.volData(ctx, e.Path, "vol_data/staging/"+csiSafeRel(rel)+".json")
		c.inv.StagingVolumes = append(c.inv.StagingVolumes, sv)
	}
}

// podVolumes lists pods/<uid>/volumes/<plugin>/<volume>.
func (c *csiRun) podVolumes(ctx context.Context) {
	podsDir := path.Join(c.opts.KubeletDir, "pods")
	pods, err := c.readDir(ctx, podsDir, c.opts.MaxEntries)
	if err != nil {
		if !csiNotExist(err) {
			c.inv.Errors = append(c.inv.Errors, fmt.Sprintf("listing %s: %v", podsDir, err))
		}
		return
	}
	for _, pod := range pods {
		if ctx.Err() != nil {
			c.inv.Errors = append(c.inv.Errors, "stopped listing pods: "+ctx.Err().Error())
			return
		}
		if pod.Type != unix.DT_DIR && pod.Type != unix.DT_UNKNOWN {
			continue
		}
		volsDir := path.Join(podsDir, pod.Name, "volumes")
		plugins, err := c.readDir(ctx, volsDir, 200)
		if err != nil {
			if !csiNotExist(err) {
				c.inv.Errors = append(c.inv.Errors, fmt.Sprintf("listing %s: %v", volsDir, err))
			}
			continue
		}
		for _, pl := range plugins {
			plDir := path.Join(volsDir, pl.Name)
			if c.mt.isMountpoint(plDir) {
				continue
			}
			vols, err := c.readDir(ctx, plDir, 1000)
			if err != nil {
				c.inv.Errors = append(c.inv.Errors, fmt.Sprintf("listing %s: %v", plDir, err))
				continue
			}
			for _, v := range vols {
				c.podVolume(ctx, pod.Name, pl.Name, path.Join(plDir, v.Name))
			}
		}
	}
}

func (c *csiRun) podVolume(ctx context.Context, uid, plugin, dir string) {
	name := path.Base(dir)
	pv := CSIPodVolume{PodUID: uid, Plugin: plugin, Volume: name, Dir: dir, MountPath: dir,
		DeletingLeftover: strings.Contains(name, ".deleting~")}
	isCSI := plugin == "kubernetes.io~csi"
	if isCSI {
		pv.MountPath = path.Join(dir, "mount")
	}
	pv.Mounts, pv.Mounted = c.mt.at(pv.MountPath)
	// vol_data.json sits beside the mount, in the volume directory: read
	// it unless that directory is itself a mountpoint (then it would be
	// inside the volume).
	if isCSI && !c.mt.isMountpoint(dir) {
		pv.VolData, pv.VolDataFile, pv.VolDataError = c.volData(ctx, path.Join(dir, "vol_data.json"),
			"vol_data/"+csiSafeName(uid)+"/"+csiSafeName(name)+".json")
	}
	c.inv.PodVolumes = append(c.inv.PodVolumes, pv)
}

// volData reads, copies and parses one vol_data.json.
func (c *csiRun) volData(ctx context.Context, hostPath, bundleName string) (*CSIVolData, string, string) {
	r, err := c.readFile(ctx, hostPath, 64<<10)
	if err != nil {
		if csiNotExist(err) {
			return nil, "", "no vol_data.json"
		}
		return nil, "", err.Error()
	}
	file := ""
	if name := c.unique(bundleName); name != "" {
		if werr := c.env.WriteFile(name, r.Data); werr == nil {
			file = name
		}
	}
	vd, perr := ParseVolData(r.Data)
	if perr != nil {
		return nil, file, perr.Error()
	}
	return &vd, file, ""
}

// unique returns name, or a variant not yet written (two odd names can
// sanitize to the same bundle path).
func (c *csiRun) unique(name string) string {
	if !c.files[name] {
		c.files[name] = true
		return name
	}
	ext := path.Ext(name)
	for i := 2; i < 1000; i++ {
		n := fmt.Sprintf("%s.%d%s", strings.TrimSuffix(name, ext), i, ext)
		if !c.files[n] {
			c.files[n] = true
			return n
		}
	}
	return ""
}

// stateFiles expands the state globs and reads, copies and parses every
// match.
func (c *csiRun) stateFiles(ctx context.Context) {
	seen := map[string]bool{}
	for _, g := range c.opts.StateGlobs {
		if g == "" || !path.IsAbs(g) {
			c.inv.Errors = append(c.inv.Errors, fmt.Sprintf("state glob %q: not an absolute path", g))
			continue
		}
		var matches []string
		pattern := c.env.HostPath(g)
		if err := c.do(ctx, opCSIGlob, csiGlobPrefix(g), CSIGlobRequest{Pattern: pattern, Max: 100}, &matches); err != nil {
			c.inv.Errors = append(c.inv.Errors, fmt.Sprintf("state glob %s: %v", g, err))
			continue
		}
		for _, m := range matches {
			host := c.hostOf(m)
			if seen[host] {
				continue
			}
			seen[host] = true
			c.stateFile(ctx, host)
		}
	}
}

// hostOf turns a path as nodesnap sees it back into a host path.
func (c *csiRun) hostOf(p string) string {
	root := c.env.Root
	if root == "" || root == "/" {
		return p
	}
	if rest, ok := strings.CutPrefix(p, strings.TrimSuffix(root, "/")); ok && strings.HasPrefix(rest, "/") {
		return rest
	}
	return p
}

// csiGlobPrefix is the part of a glob before its first metacharacter:
// what must not be hung for the glob to be expanded.
func csiGlobPrefix(g string) string {
	i := strings.IndexAny(g, "*?[\\")
	if i < 0 {
		return g
	}
	return path.Dir(g[:i] + "x")
}

const csiStateMax = 16 << 20

func (c *csiRun) stateFile(ctx context.Context, host string) {
	sf := CSIStateFile{Path: host}
	r, err := c.readFile(ctx, host, csiStateMax)
	if err != nil {
		sf.ReadError = err.Error()
		sf.Format = "invalid"
		c.inv.StateFiles = append(c.inv.StateFiles, sf)
		c.inv.Errors = append(c.inv.Errors, fmt.Sprintf("reading %s: %v", host, err))
		return
	}
	sf.Bytes, sf.Truncated = len(r.Data), r.Truncated
	if name := c.unique("state/" + csiSafeRel(strings.TrimPrefix(host, "/"))); name != "" {
		if werr := c.env.WriteFile(name, r.Data); werr == nil {
			sf.File = name
		}
	}
	st, perr := ParseCSIState(r.Data)
	sf.Format, sf.Volumes, sf.Snapshots = st.Format, st.Volumes, st.Snapshots
	if perr != nil {
		sf.ParseError = perr.Error()
		if r.Truncated {
			sf.ParseError += fmt.Sprintf(" (nodesnap read only the first %d bytes)", csiStateMax)
		}
		c.env.Notef("CSI state file %s is malformed or truncated (%s); kept raw as csi/%s", host, sf.ParseError, sf.File)
	}
	c.inv.StateFiles = append(c.inv.StateFiles, sf)
}

// crossCheck compares each csi-hostpath volume's Published list with the
// pods' vol_data.json and the mount table.
func (c *csiRun) crossCheck() {
	if c.mt == nil {
		return
	}
	// The hostpath driver bind-mounts <data dir>/<VolID>: a mount whose
	// root ends in a volume's ID is that volume, even when no vol_data.json
	// points at it any more.
	byRootBase := map[string][]string{}
	for mp, ms := range c.mt.byPoint {
		for _, m := range ms {
			if b := path.Base(m.Root); b != "/" && b != "." {
				byRootBase[b] = append(byRootBase[b], mp)
			}
		}
	}
	podsPrefix := path.Join(c.opts.KubeletDir, "pods") + "/"
	byHandle := map[string][]*CSIPodVolume{}
	for i := range c.inv.PodVolumes {
		pv := &c.inv.PodVolumes[i]
		if pv.VolData != nil && pv.VolData.VolumeHandle != "" {
			byHandle[pv.VolData.VolumeHandle] = append(byHandle[pv.VolData.VolumeHandle], pv)
		}
	}
	for si := range c.inv.StateFiles {
		sf := &c.inv.StateFiles[si]
		if sf.Format != "csi-hostpath" {
			continue
		}
		for vi := range sf.Volumes {
			v := &sf.Volumes[vi]
			published := map[string]bool{}
			for _, p := range v.Published {
				published[path.Clean(p)] = true
			}
			targets := map[string]string{} // target → pod uid
			for _, p := range v.Published {
				targets[path.Clean(p)] = ""
			}
			for _, pv := range byHandle[v.VolID] {
				targets[path.Clean(pv.MountPath)] = pv.PodUID
			}
			if v.VolID != "" {
				for _, mp := range byRootBase[v.VolID] {
					if _, ok := targets[mp]; !ok {
						uid := ""
						if rest, ok := strings.CutPrefix(mp, podsPrefix); ok {
							uid, _, _ = strings.Cut(rest, "/")
						}
						targets[mp] = uid
					}
				}
			}
			keys := make([]string, 0, len(targets))
			for t := range targets {
				keys = append(keys, t)
			}
			sort.Strings(keys)
			for _, t := range keys {
				mounted := c.mt.isMountpoint(t)
				if mounted {
					v.MountedTargets = append(v.MountedTargets, t)
				}
				switch {
				case mounted && !published[t]:
					c.inv.Findings = append(c.inv.Findings, CSIFinding{Kind: "published-lost", StateFile: sf.Path, VolumeID: v.VolID,
						TargetPath: t, PodUID: targets[t],
						Detail: fmt.Sprintf("volume %s is mounted at %s but %s records it as not published there (Published: %s): the driver's NodeUnpublishVolume will return success without unmounting, so the pod's volume teardown fails with \"device or resource busy\" (incident 004); unmount the target by hand", v.VolID, t, sf.Path, v.PublishedState)})
				case !mounted && published[t]:
					c.inv.Findings = append(c.inv.Findings, CSIFinding{Kind: "published-not-mounted", StateFile: sf.Path, VolumeID: v.VolID,
						TargetPath: t, PodUID: targets[t],
						Detail: fmt.Sprintf("%s records volume %s as published at %s, but nothing is mounted there", sf.Path, v.VolID, t)})
				}
			}
		}
	}
}

// csiSafeName makes one path element safe as a bundle file name.
func csiSafeName(s string) string {
	if s == "" || s == "." || s == ".." {
		return "_"
	}
	b := []byte(s)
	for i, ch := range b {
		ok := ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || strings.IndexByte("._-~+@:=", ch) >= 0
		if !ok {
			b[i] = '_'
		}
	}
	return string(b)
}

func csiSafeRel(rel string) string {
	parts := strings.Split(rel, "/")
	out := parts[:0]
	for _, p := range parts {
		if p != "" {
			out = append(out, csiSafeName(p))
		}
	}
	if len(out) == 0 {
		return "_"
	}
	return strings.Join(out, "/")
}

// CSIState is what ParseCSIState understood of a state file.
type CSIState struct {
	Format    string
	Volumes   []CSIStateVolume
	Snapshots int
}

// ParseCSIState decodes a CSI driver's state file. It knows
// csi-driver-host-path's layout ({"Volumes": [...], "Snapshots": [...]},
// Go field names as keys); other JSON is "json", anything else "invalid"
// with the error. It never panics on bad input.
func ParseCSIState(data []byte) (CSIState, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		var v json.RawMessage
		if json.Unmarshal(data, &v) == nil {
			return CSIState{Format: "json"}, nil
		}
		return CSIState{Format: "invalid"}, fmt.Errorf("not valid JSON: %w", err)
	}
	rawVols, ok := csiField(top, "Volumes")
	if !ok {
		return CSIState{Format: "json"}, nil
	}
	st := CSIState{Format: "csi-hostpath"}
	var vols []map[string]json.RawMessage
	if string(rawVols) != "null" {
		if err := json.Unmarshal(rawVols, &vols); err != nil {
			return CSIState{Format: "invalid"}, fmt.Errorf("\"Volumes\" is not a list of objects: %w", err)
		}
	}
	for _, v := range vols {
		sv := CSIStateVolume{
			VolID: csiStr(v, "VolID"), VolName: csiStr(v, "VolName"), VolPath: csiStr(v, "VolPath"),
			NodeID: csiStr(v, "NodeID"), Kind: csiStr(v, "Kind"),
		}
		sv.PublishedState, sv.Published = csiPaths(v, "Published")
		sv.StagedState, sv.Staged = csiPaths(v, "Staged")
		st.Volumes = append(st.Volumes, sv)
	}
	if rawSnaps, ok := csiField(top, "Snapshots"); ok {
		var snaps []json.RawMessage
		if json.Unmarshal(rawSnaps, &snaps) == nil {
			st.Snapshots = len(snaps)
		}
	}
	return st, nil
}

// csiField finds a key as encoding/json would (exact, else any case).
func csiField(m map[string]json.RawMessage, key string) (json.RawMessage, bool) {
	if v, ok := m[key]; ok {
		return v, true
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if strings.EqualFold(k, key) {
			return m[k], true
		}
	}
	return nil, false
}

func csiStr(m map[string]json.RawMessage, key string) string {
	raw, ok := csiField(m, key)
	if !ok {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return strings.TrimSpace(string(raw))
}

// csiPaths classifies a Published/Staged value: the driver's restart bug
// of incident 004 left "Published": null.
func csiPaths(m map[string]json.RawMessage, key string) (string, []string) {
	raw, ok := csiField(m, key)
	if !ok {
		return "missing", nil
	}
	t := strings.TrimSpace(string(raw))
	switch t {
	case "null":
		return "null", nil
	case "false":
		return "false", nil
	case "[]", `""`:
		return "empty", nil
	}
	var list []string
	if json.Unmarshal(raw, &list) == nil {
		if len(list) == 0 {
			return "empty", nil
		}
		return "set", list
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return "set", []string{one}
	}
	return "other", nil
}

// ParseVolData decodes a kubelet vol_data.json: a flat JSON object of
// strings.
func ParseVolData(data []byte) (CSIVolData, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return CSIVolData{}, fmt.Errorf("vol_data.json is not a JSON object: %w", err)
	}
	return CSIVolData{
		DriverName:          csiStr(m, "driverName"),
		VolumeHandle:        csiStr(m, "volumeHandle"),
		SpecVolID:           csiStr(m, "specVolID"),
		NodeName:            csiStr(m, "nodeName"),
		AttachmentID:        csiStr(m, "attachmentID"),
		VolumeLifecycleMode: csiStr(m, "volumeLifecycleMode"),
	}, nil
}

// --- The CSI pods' own logs ---------------------------------------------
//
// The kubelet keeps each container's log under
// <pod log dir>/<namespace>_<pod>_<uid>/<container>/<restart>.log, where
// <restart> is the container's restart count: after a restart the new
// instance writes <n+1>.log and <n>.log stays (what `kubectl logs
// --previous` shows). When a log grows past containerLogMaxSize the kubelet
// renames it <n>.log.<YYYYMMDD-hhmmss> and later gzips all but the newest
// rotated part (<n>.log.<time>.gz).
//
// Which pods: a pod is a CSI pod when its name or one of its containers'
// names contains "csi", when one of its containers' names contains
// "driver-registrar" (the CSI node-driver-registrar sidecar), or when a
// word of its name or of a container's name (words split at '-' and '.')
// is the first label of a CSI driver the kubelet knows ("hostpath" for
// hostpath.csi.k8s.io; labels shorter than 3 characters, "csi" and
// "driver" are not used). Every container of a CSI pod is kept: the
// driver, node-driver-registrar, liveness-probe and other sidecars.
//
// What of each container: its newest bytes, up to --csi-pod-log-bytes,
// taken newest first from the files of its current instance (the live
// <n>.log, then its rotated parts) and then, while the budget lasts, of
// the instance before its last restart: the instance that restarted is the
// trigger of incident 004 and its log says why. Older instances are listed,
// not read. Compressed rotated parts are listed and not read: gzip cannot
// be read from its end, so keeping its newest lines means decompressing all
// of it, and it is older than every uncompressed file. A window that
// starts mid-file drops its partial first line, which a redaction rule
// could not recognise without its start.

// PodLogDirName is a pod's log directory name, <namespace>_<pod>_<uid>.
type PodLogDirName struct {
	Namespace string
	Pod       string
	UID       string
}

// ParsePodLogDirName parses a directory name of the kubelet's pod log
// directory. The namespace must be a DNS label and the pod name a DNS
// subdomain, as Kubernetes requires (neither holds "_"); the UID is
// letters, digits and dashes (a UUID, or a static pod's hash). It never
// panics on bad input.
func ParsePodLogDirName(name string) (PodLogDirName, error) {
	parts := strings.Split(name, "_")
	if len(parts) != 3 {
		return PodLogDirName{}, fmt.Errorf("%q is not a pod log directory name: not namespace_pod-name_pod-uid", name)
	}
	d := PodLogDirName{Namespace: parts[0], Pod: parts[1], UID: parts[2]}
	switch {
	case !isDNSName(d.Namespace, 63, false):
		return PodLogDirName{}, fmt.Errorf("%q is not a pod log directory name: %q is not a namespace name", name, d.Namespace)
	case !isDNSName(d.Pod, 253, true):
		return PodLogDirName{}, fmt.Errorf("%q is not a pod log directory name: %q is not a pod name", name, d.Pod)
	case !isPodUID(d.UID):
		return PodLogDirName{}, fmt.Errorf("%q is not a pod log directory name: %q is not a pod UID", name, d.UID)
	}
	return d, nil
}

// isDNSName checks a DNS-1123 label (lowercase letters, digits, '-',
// starting and ending with a letter or digit), or with dots a subdomain
// (dot-separated labels).
func isDNSName(s string, max int, dots bool) bool {
	if s == "" || len(s) > max {
		return false
	}
	labels := []string{s}
	if dots {
		labels = strings.Split(s, ".")
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for i := 0; i < len(l); i++ {
			ch := l[i]
			if !(ch >= 'a' && ch <= 'z' || ch >= '0' && ch <= '9' || ch == '-') {
				return false
			}
		}
	}
	return true
}

func isPodUID(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '-') {
			return false
		}
	}
	return true
}

// PodLogFileName is a container log file's name: the live <restart>.log, a
// rotated <restart>.log.<time>, or a compressed <restart>.log.<time>.gz.
type PodLogFileName struct {
	Restart int
	// Rotation is the rotated part's time stamp ("" for the live file).
	Rotation   string
	Compressed bool
}

// ParsePodLogFileName parses a container log file's name; ok is false for
// anything else (the kubelet's ".tmp" files while it compresses, names of
// other programs). It never panics on bad input.
func ParsePodLogFileName(name string) (PodLogFileName, bool) {
	num, rest, ok := strings.Cut(name, ".log")
	if !ok || num == "" || len(num) > 9 || (num[0] == '0' && len(num) > 1) {
		return PodLogFileName{}, false
	}
	n := 0
	for i := 0; i < len(num); i++ {
		if num[i] < '0' || num[i] > '9' {
			return PodLogFileName{}, false
		}
		n = n*10 + int(num[i]-'0')
	}
	if rest == "" {
		return PodLogFileName{Restart: n}, true
	}
	stamp, ok := strings.CutPrefix(rest, ".")
	if !ok {
		return PodLogFileName{}, false
	}
	f := PodLogFileName{Restart: n}
	stamp, f.Compressed = strings.CutSuffix(stamp, ".gz")
	if stamp == "" || stamp == "gz" || stamp == "tmp" || len(stamp) > 64 || strings.HasSuffix(stamp, ".tmp") {
		return PodLogFileName{}, false
	}
	for i := 0; i < len(stamp); i++ {
		ch := stamp[i]
		if !(ch >= '0' && ch <= '9' || ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch == '-' || ch == '.' || ch == '_') {
			return PodLogFileName{}, false
		}
	}
	f.Rotation = stamp
	return f, true
}

// csiDrivers names the CSI drivers the kubelet knows: registration sockets
// in plugins_registry (<driver>-reg.sock), directories directly under
// plugins/ (but kubernetes.io, the staging tree), and the drivers of
// vol_data.json files.
func (c *csiRun) csiDrivers() []string {
	set := map[string]bool{}
	add := func(name string) {
		if name != "" && !strings.ContainsAny(name, " /\t\n") {
			set[name] = true
		}
	}
	reg := path.Join(c.opts.KubeletDir, "plugins_registry") + "/"
	for _, e := range c.inv.PluginsRegistry {
		if rest, ok := strings.CutPrefix(e.Path, reg); ok && !strings.Contains(rest, "/") {
			add(strings.TrimSuffix(strings.TrimSuffix(rest, ".sock"), "-reg"))
		}
	}
	pl := path.Join(c.opts.KubeletDir, "plugins") + "/"
	for _, e := range c.inv.Plugins {
		if rest, ok := strings.CutPrefix(e.Path, pl); ok && e.Type == "dir" && !strings.Contains(rest, "/") && rest != "kubernetes.io" {
			add(rest)
		}
	}
	for _, pv := range c.inv.PodVolumes {
		if pv.VolData != nil {
			add(pv.VolData.DriverName)
		}
	}
	for _, sv := range c.inv.StagingVolumes {
		if sv.VolData != nil {
			add(sv.VolData.DriverName)
		}
	}
	out := make([]string, 0, len(set))
	for d := range set {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}

// csiDriverWords maps the first label of each driver's name to the driver:
// the word its pods and containers are usually named with.
func csiDriverWords(drivers []string) map[string]string {
	words := map[string]string{}
	for _, d := range drivers {
		w, _, _ := strings.Cut(strings.ToLower(d), ".")
		if len(w) < 3 || w == "csi" || w == "driver" {
			continue
		}
		if _, dup := words[w]; !dup {
			words[w] = d
		}
	}
	return words
}

// CSIPodMatch says why a pod is a CSI pod (see the rule above), or "" when
// it is not. driverWords comes from the drivers' names (first label →
// driver).
func CSIPodMatch(pod string, containers []string, driverWords map[string]string) string {
	if strings.Contains(strings.ToLower(pod), "csi") {
		return `pod name contains "csi"`
	}
	for _, c := range containers {
		lc := strings.ToLower(c)
		switch {
		case strings.Contains(lc, "csi"):
			return fmt.Sprintf("container %q contains \"csi\"", c)
		case strings.Contains(lc, "driver-registrar"):
			return fmt.Sprintf("container %q is a CSI driver registrar", c)
		}
	}
	if len(driverWords) == 0 {
		return ""
	}
	words := func(s string) []string {
		return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return r == '-' || r == '.' })
	}
	for _, w := range words(pod) {
		if d, ok := driverWords[w]; ok {
			return fmt.Sprintf("pod name has the word %q of CSI driver %s", w, d)
		}
	}
	for _, c := range containers {
		for _, w := range words(c) {
			if d, ok := driverWords[w]; ok {
				return fmt.Sprintf("container %q has the word %q of CSI driver %s", c, w, d)
			}
		}
	}
	return ""
}

// podLogs keeps the newest logs of every container of every CSI pod.
func (c *csiRun) podLogs(ctx context.Context) {
	root := c.opts.PodLogDir
	c.inv.PodLogDir = root
	c.inv.Drivers = c.csiDrivers()
	if !path.IsAbs(root) {
		c.inv.Errors = append(c.inv.Errors, fmt.Sprintf("pod log directory %q: not an absolute path; the CSI pods' logs were not read", root))
		return
	}
	pods, err := c.readDir(ctx, root, c.opts.MaxEntries)
	if err != nil {
		if !csiNotExist(err) {
			c.inv.Errors = append(c.inv.Errors, fmt.Sprintf("listing the pod log directory %s: %v", root, err))
		}
		return
	}
	words := csiDriverWords(c.inv.Drivers)
	bundleDirs := map[string]bool{}
	var kept int64
	csiPods := 0
	for _, pd := range pods {
		if ctx.Err() != nil {
			c.inv.Errors = append(c.inv.Errors, "stopped reading the CSI pods' logs: the collector's deadline was reached")
			break
		}
		if pd.Type != unix.DT_DIR && pd.Type != unix.DT_UNKNOWN {
			continue
		}
		podDir := path.Join(root, pd.Name)
		ref, err := ParsePodLogDirName(pd.Name)
		if err != nil {
			c.inv.Errors = append(c.inv.Errors, fmt.Sprintf("%s: %v", podDir, err))
			continue
		}
		ents, err := c.readDir(ctx, podDir, 100)
		if err != nil {
			c.inv.Errors = append(c.inv.Errors, fmt.Sprintf("listing %s: %v", podDir, err))
			continue
		}
		var containers []string
		for _, e := range ents {
			if e.Type == unix.DT_DIR || e.Type == unix.DT_UNKNOWN {
				containers = append(containers, e.Name)
			}
		}
		match := CSIPodMatch(ref.Pod, containers, words)
		if match == "" {
			continue
		}
		csiPods++
		// Two pods of one name (a StatefulSet's pod deleted and created
		// again) keep apart by their UIDs.
		bdir := "podlogs/" + csiSafeName(ref.Namespace+"_"+ref.Pod)
		if bundleDirs[bdir] {
			bdir += "_" + csiSafeName(ref.UID)
		}
		bundleDirs[bdir] = true
		for _, cn := range containers {
			if ctx.Err() != nil {
				break
			}
			pl := c.containerLogs(ctx, ref, path.Join(podDir, cn), cn, bdir+"/"+csiSafeName(cn), match)
			kept += pl.Bytes
			c.inv.PodLogs = append(c.inv.PodLogs, pl)
		}
	}
	if len(c.inv.PodLogs) > 0 {
		c.env.Notef("kept %s of the logs of %d containers of %d CSI pods under csi/podlogs/ (newest first, at most %s per container)",
			humanBytes(kept), len(c.inv.PodLogs), csiPods, humanBytes(c.opts.PodLogBytes))
	}
}

// containerLogs keeps the newest bytes of one container's logs: its
// current instance's files, then its previous instance's, newest first.
func (c *csiRun) containerLogs(ctx context.Context, ref PodLogDirName, dir, container, bundleDir, match string) CSIPodLog {
	pl := CSIPodLog{Namespace: ref.Namespace, Pod: ref.Pod, PodUID: ref.UID, Container: container, Dir: dir, Match: match, Files: []CSIPodLogFile{}}
	ents, err := c.readDir(ctx, dir, 1000)
	if err != nil {
		pl.Error = err.Error()
		c.inv.Errors = append(c.inv.Errors, fmt.Sprintf("listing %s: %v", dir, err))
		return pl
	}
	type logFile struct {
		name string
		typ  uint8
		PodLogFileName
	}
	var files []logFile
	for _, e := range ents {
		if n, ok := ParsePodLogFileName(e.Name); ok {
			files = append(files, logFile{e.Name, e.Type, n})
		}
	}
	// Newest first: the highest restart count; within an instance the
	// live file, then rotated parts by time stamp (the kubelet's stamps
	// sort as text).
	sort.Slice(files, func(i, j int) bool {
		a, b := files[i], files[j]
		if a.Restart != b.Restart {
			return a.Restart > b.Restart
		}
		if (a.Rotation == "") != (b.Rotation == "") {
			return a.Rotation == ""
		}
		if a.Rotation != b.Rotation {
			return a.Rotation > b.Rotation
		}
		return !a.Compressed && b.Compressed
	})
	current, previous := -1, -1
	for _, f := range files {
		switch {
		case current < 0:
			current = f.Restart
		case previous < 0 && f.Restart != current:
			previous = f.Restart
		}
	}
	budget := c.podLogBudget()
	for _, f := range files {
		lf := CSIPodLogFile{Name: f.name, Path: path.Join(dir, f.name), Restart: f.Restart, Instance: "older",
			Rotated: f.Rotation != "", Compressed: f.Compressed}
		switch f.Restart {
		case current:
			lf.Instance = "current"
		case previous:
			lf.Instance = "previous"
		}
		switch {
		case lf.Instance == "older":
			lf.Skipped = "an older container instance: only the current one and the one before it are read"
		case f.typ != unix.DT_REG && f.typ != unix.DT_UNKNOWN:
			lf.Skipped = "not a regular file"
		case f.Compressed:
			lf.Skipped = "compressed: only uncompressed files are read"
			pl.Truncated = true
		case budget <= 0:
			lf.Skipped = "older than the newest bytes kept (--csi-pod-log-bytes, or the collector's byte cap)"
			pl.Truncated = true
		case ctx.Err() != nil:
			lf.Skipped = "the collector's deadline was reached"
			pl.Truncated = true
		default:
			err := c.podLogFile(ctx, &lf, budget, bundleDir)
			pl.Bytes += lf.Bytes
			budget -= lf.Bytes
			switch {
			case err != nil && csiNotExist(err):
				// Rotated away since the listing: the next file
				// holds what it had.
			case err != nil:
				// A failed or hung read: the files beside it are on the
				// same filesystem and would most likely fail the same way.
				budget = 0
				pl.Truncated = true
			case lf.Truncated:
				// The window ends inside this file: what is older
				// would be a sliver, cut from what it continues.
				budget = 0
				pl.Truncated = true
			}
		}
		pl.Files = append(pl.Files, lf)
	}
	return pl
}

// podLogFile reads the last max bytes of one log file and keeps them, whole
// lines only, under bundleDir. The error is the read's (lf says what
// became of the file either way).
func (c *csiRun) podLogFile(ctx context.Context, lf *CSIPodLogFile, max int64, bundleDir string) error {
	var r isolate.ReadFileResult
	err := c.do(ctx, isolate.OpReadFile, lf.Path, isolate.ReadFileRequest{Path: c.env.HostPath(lf.Path), Max: max, Tail: true}, &r)
	if err != nil {
		lf.Error = err.Error()
		if !csiNotExist(err) {
			c.inv.Errors = append(c.inv.Errors, fmt.Sprintf("reading %s: %v", lf.Path, err))
		}
		return err
	}
	lf.SourceBytes = r.Size
	data := r.Data
	if r.Offset > 0 {
		lf.Truncated = true
		// The window starts mid-line: that partial line goes.
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			data = data[i+1:]
		} else {
			data = nil
		}
	}
	if len(data) == 0 {
		return nil
	}
	name := c.unique(bundleDir + "/" + csiSafeName(lf.Name))
	if name == "" {
		lf.Error = "too many files of the same name in the bundle"
		return nil
	}
	f, err := c.env.Create(name)
	if err != nil {
		lf.Error = err.Error()
		return nil
	}
	_, werr := f.Write(data)
	if lf.Truncated {
		markTruncated(f)
	}
	cerr := f.Close()
	switch {
	case werr != nil:
		lf.Error = fmt.Sprintf("writing csi/%s: %v", name, werr)
	case cerr != nil:
		lf.Error = cerr.Error()
	}
	lf.File = name
	lf.Bytes = int64(len(data))
	if f.Truncated() {
		lf.Truncated = true
	}
	return nil
}

// podLogBudget is how many bytes one container's logs may take: the
// per-container flag within the per-file cap and what is left of the
// collector's cap, with room kept for redaction (a replacement can be
// longer than the secret) and for inventory.json, written last.
func (c *csiRun) podLogBudget() int64 {
	var reserve int64
	if cc := c.env.MaxCollectorBytes; cc > 0 {
		reserve = min(4<<20, cc/8)
	}
	return c.env.Budget(c.opts.PodLogBytes, reserve)
}
