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
// kubelet's plugin directories, each pod volume's vol_data.json, and which
// of the volumes' mount paths are mounted — taken from the mount table,
// never by stat()ing the mount path. Every listing and read is one item in
// an isolated worker: a plugin directory on a hung mount costs one probe.

func init() {
	Register(Spec{
		Name:           "csi",
		Description:    "CSI driver state files, kubelet plugins and plugins_registry, every pod volume's vol_data.json, and the pod → volume → mount inventory",
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
}

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
	o.KubeletDir = path.Clean(o.KubeletDir)
	inv := &CSIInventory{KubeletDir: o.KubeletDir, PodVolumes: []CSIPodVolume{}, StagingVolumes: []CSIStagingVolume{},
		StateFiles: []CSIStateFile{}, Plugins: []CSIDirEntry{}, PluginsRegistry: []CSIDirEntry{}, Findings: []CSIFinding{}}
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
