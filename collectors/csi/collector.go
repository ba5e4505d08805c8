package csi

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/collectors/hostfs"
	"github.com/nodesnap/nodesnap/engine/isolate"
	"github.com/nodesnap/nodesnap/internal/cliflag"
	"github.com/nodesnap/nodesnap/internal/procfs"
)

// The csi collector gathers the CSI state a human would read when a volume
// will not go away (incident 004): the drivers' own state files, the
// kubelet's plugin directories, each pod volume's vol_data.json, which of
// the volumes' mount paths are mounted — taken from the mount table, never
// by stat()ing the mount path — and the newest logs of the CSI driver
// pods' containers (what `kubectl logs` and `kubectl logs --previous`
// would show), and the logs of drivers run as host processes, found
// through the sockets the kubelet knows (hostdrivers.go). Every listing and read is one item in an isolated worker: a
// plugin directory on a hung mount costs one probe.

func init() {
	collectors.Register(collectors.Spec{
		Name:           layout.DirCSI,
		Description:    "CSI driver state files, kubelet plugins and plugins_registry, every pod volume's vol_data.json, the pod → volume → mount inventory, the newest container logs of the CSI driver pods (found by what their containers mount; current and previous instance), and the log file or journal lines of CSI drivers run as host processes (found through their sockets)",
		Requires:       "root: /var/lib/kubelet/plugins, plugins_registry, pod volume directories and the CSI pods' logs under /var/log/pods",
		DefaultEnabled: true,
		DefaultTimeout: 40 * time.Second,
		After:          []string{collectors.MountprobeName},
		Options:        &opts,
		Flags:          flags,
		Files:          files,
		Run:            collect,
	})
}

// Options are the csi collector's flags. Paths are host paths.
type Options struct {
	StateGlobs []string `json:"state_globs"`
	KubeletDir string   `json:"kubelet_dir"`
	// MaxEntries bounds every listing (pods, plugin trees).
	MaxEntries int `json:"max_entries"`
	// PodLogDir is the kubelet's pod log root; PodLogBytes the newest
	// bytes kept of each CSI container's logs.
	PodLogDir   string `json:"pod_log_dir"`
	PodLogBytes int64  `json:"pod_log_bytes"`
	// BundleDirs are where the runtimes keep their containers' OCI
	// configs: CSI node plugins are found there by their mounts.
	BundleDirs []string `json:"bundle_dirs"`
}

// Defaults of the csi collector's pod logs.
const (
	DefaultCSIPodLogDir   = "/var/log/pods"
	DefaultCSIPodLogBytes = 2 << 20
)

// DefaultCSIStateGlobs are state files of drivers known to keep one.
var DefaultCSIStateGlobs = []string{
	// csi-driver-host-path: its "Published" list lost on restart is
	// incident 004 (csi-driver-host-path#457).
	"/var/lib/csi-hostpath-data/state.json",
}

// defaults are the options no flag changed: the one place a default is
// written.
var defaults = Options{StateGlobs: DefaultCSIStateGlobs, KubeletDir: "/var/lib/kubelet", MaxEntries: 5000,
	PodLogDir: DefaultCSIPodLogDir, BundleDirs: DefaultCSIBundleDirs, PodLogBytes: DefaultCSIPodLogBytes}

// opts are the options the flags set (in the supervisor); they reach the
// collector's child as JSON.
var opts = defaults

func flags(fs *pflag.FlagSet) {
	opts = defaults
	o := &opts
	fs.StringSliceVar(&o.StateGlobs, "csi-state-glob", o.StateGlobs, "csi: driver state files to keep and cross-check (globs, host paths; replaces the default list)")
	fs.StringVar(&o.KubeletDir, "csi-kubelet-dir", o.KubeletDir, "csi: the kubelet's root directory (--root-dir of the kubelet)")
	fs.IntVar(&o.MaxEntries, "csi-max-entries", o.MaxEntries, "csi: most directory entries listed per tree (pods, plugins)")
	fs.StringVar(&o.PodLogDir, "csi-pod-log-dir", o.PodLogDir, "csi: the kubelet's pod log directory, where the CSI driver pods' container logs are read (host path)")
	fs.StringSliceVar(&o.BundleDirs, "csi-bundle-dir", o.BundleDirs, "csi: where container runtimes keep their containers' OCI configs (host paths; replaces the default list): a container that mounts the kubelet's plugin registration or plugins directory is a CSI node plugin, whatever its name, and its pod's logs are kept")
	fs.Var((*cliflag.PositiveSize)(&o.PodLogBytes), "csi-pod-log-bytes", "csi: newest bytes kept of each CSI container's logs (its current instance first, then the one before its last restart)")
}

// csiMountTable indexes mountinfo by mount point.
type csiMountTable struct {
	byPoint map[string][]procfs.Mount
}

func (t *csiMountTable) at(p string) ([]layout.CSIMountRef, *bool) {
	if t == nil {
		return nil, nil
	}
	ms := t.byPoint[path.Clean(p)]
	var refs []layout.CSIMountRef
	for _, m := range ms {
		refs = append(refs, layout.CSIMountRef{MountID: m.ID, Dev: m.Dev(), Root: m.Root, FSType: m.FSType, Source: m.Source})
	}
	mounted := len(ms) > 0
	return refs, &mounted
}

func (t *csiMountTable) isMountpoint(p string) bool {
	return t != nil && len(t.byPoint[path.Clean(p)]) > 0
}

type csiRun struct {
	env   *collectors.Env
	opts  Options
	mt    *csiMountTable
	inv   *layout.CSIInventory
	files map[string]bool
}

func collect(ctx context.Context, env *collectors.Env) error {
	o := defaults
	if err := env.Options(&o); err != nil {
		return err
	}
	if o.KubeletDir == "" {
		o.KubeletDir = defaults.KubeletDir
	}
	if o.MaxEntries <= 0 {
		o.MaxEntries = defaults.MaxEntries
	}
	if o.StateGlobs == nil {
		o.StateGlobs = defaults.StateGlobs
	}
	if o.PodLogDir == "" {
		o.PodLogDir = defaults.PodLogDir
	}
	if o.BundleDirs == nil {
		o.BundleDirs = defaults.BundleDirs
	}
	if o.PodLogBytes <= 0 {
		o.PodLogBytes = defaults.PodLogBytes
	}
	o.KubeletDir = path.Clean(o.KubeletDir)
	o.PodLogDir = path.Clean(o.PodLogDir)
	inv := &layout.CSIInventory{KubeletDir: o.KubeletDir, PodVolumes: []layout.CSIPodVolume{}, StagingVolumes: []layout.CSIStagingVolume{},
		StateFiles: []layout.CSIStateFile{}, Plugins: []layout.CSIDirEntry{}, PluginsRegistry: []layout.CSIDirEntry{}, Findings: []layout.CSIFinding{},
		PodLogs: []layout.CSIPodLog{}}
	c := &csiRun{env: env, opts: o, inv: inv, files: map[string]bool{}}

	st, err := env.Host().Stat(ctx, hostfs.Path(o.KubeletDir))
	kubeletFound := err == nil && st.Mode&syscall.S_IFMT == syscall.S_IFDIR
	c.stateFiles(ctx)
	if !kubeletFound && len(inv.StateFiles) == 0 {
		_ = env.WriteJSON(layout.CSIInventoryFile, inv)
		return fmt.Errorf("no kubelet directory at %s and no CSI state file matching %s: %w", o.KubeletDir, strings.Join(o.StateGlobs, ", "), collectors.ErrUnsupported)
	}

	// The host's mount table as pid 1 sees it: its mount points are host
	// paths, the same namespace the kubelet mounts volumes in.
	inv.MountTable = env.ProcPath("1", "mountinfo")
	if mounts, err := env.Host().HostMounts(ctx); err != nil {
		inv.MountTableError = err.Error()
		env.Partialf("cannot read the mount table %s: %v; whether volumes are mounted is unknown", inv.MountTable, err)
	} else {
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
	// Drivers run as host processes log elsewhere: found through their
	// sockets.
	if kubeletFound {
		c.hostDrivers(ctx)
	}
	if err := env.WriteJSON(layout.CSIInventoryFile, inv); err != nil {
		return err
	}
	if hung := env.Host().HungHere(); len(hung) > 0 {
		paths := make([]string, len(hung))
		for i, h := range hung {
			paths[i] = string(h)
		}
		env.Partialf("CSI paths that hung when listed or read were skipped (%d): %s", len(hung), strings.Join(paths, ", "))
	}
	return nil
}

func (c *csiRun) readDir(ctx context.Context, hostPath string, max int) ([]hostfs.Dirent, error) {
	r, err := c.env.Host().List(ctx, hostfs.Path(hostPath), max)
	if err != nil {
		return nil, err
	}
	if r.Truncated {
		c.inv.Errors = append(c.inv.Errors, fmt.Sprintf("%s: more than %d entries; the rest were not listed", hostPath, max))
	}
	return r.Entries, nil
}

func (c *csiRun) readFile(ctx context.Context, hostPath string, max int64) (isolate.ReadFileResult, error) {
	return c.env.Host().Read(ctx, hostfs.Path(hostPath), max)
}

// walk lists a tree breadth-first down to maxDepth levels, never entering
// a mountpoint, at most MaxEntries entries.
func (c *csiRun) walk(ctx context.Context, root string, maxDepth int) []layout.CSIDirEntry {
	out := []layout.CSIDirEntry{}
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
			if !errors.Is(err, fs.ErrNotExist) || d.p != root {
				c.inv.Errors = append(c.inv.Errors, fmt.Sprintf("listing %s: %v", d.p, err))
			}
			continue
		}
		for _, e := range entries {
			p := path.Join(d.p, e.Name)
			de := layout.CSIDirEntry{Path: p, Type: csiTypeName(e.Name, e.Type), Mountpoint: c.mt.isMountpoint(p)}
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
		sv := layout.CSIStagingVolume{Dir: dir, GlobalMountPath: path.Join(dir, "globalmount")}
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
		if !errors.Is(err, fs.ErrNotExist) {
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
			if !errors.Is(err, fs.ErrNotExist) {
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
	pv := layout.CSIPodVolume{PodUID: uid, Plugin: plugin, Volume: name, Dir: dir, MountPath: dir,
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
func (c *csiRun) volData(ctx context.Context, hostPath, bundleName string) (*layout.CSIVolData, string, string) {
	r, err := c.readFile(ctx, hostPath, 64<<10)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
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
		matches, _, err := c.env.Host().Glob(ctx, hostfs.Path(g), 100)
		if err != nil {
			c.inv.Errors = append(c.inv.Errors, fmt.Sprintf("state glob %s: %v", g, err))
			continue
		}
		for _, m := range matches {
			host := string(m)
			if seen[host] {
				continue
			}
			seen[host] = true
			c.stateFile(ctx, host)
		}
	}
}

const csiStateMax = 16 << 20

func (c *csiRun) stateFile(ctx context.Context, host string) {
	sf := layout.CSIStateFile{Path: host}
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
	byHandle := map[string][]*layout.CSIPodVolume{}
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
					c.inv.Findings = append(c.inv.Findings, layout.CSIFinding{Kind: "published-lost", StateFile: sf.Path, VolumeID: v.VolID,
						TargetPath: t, PodUID: targets[t],
						Detail: fmt.Sprintf("volume %s is mounted at %s but %s records it as not published there (Published: %s): the driver's NodeUnpublishVolume will return success without unmounting, so the pod's volume teardown fails with \"device or resource busy\" (incident 004); unmount the target by hand", v.VolID, t, sf.Path, v.PublishedState)})
				case !mounted && published[t]:
					c.inv.Findings = append(c.inv.Findings, layout.CSIFinding{Kind: "published-not-mounted", StateFile: sf.Path, VolumeID: v.VolID,
						TargetPath: t, PodUID: targets[t],
						Detail: fmt.Sprintf("%s records volume %s as published at %s, but nothing is mounted there", sf.Path, v.VolID, t)})
				}
			}
		}
	}
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
