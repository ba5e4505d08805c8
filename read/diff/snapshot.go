// Package diff compares two nodesnap bundles: what changed on a node
// between two collections (nodesnap diff).
//
// Each bundle is read in three bounded streaming passes through the bundle
// package's safe readers: bundle.Validate (a bundle it refuses is
// refused), analyze's own pass for its findings and log signatures, then
// one pass that keeps a small Snapshot of the facts a diff compares (mount
// tables, hung mounts, tasks in D state, pods, containers, directory
// shapes, the kubelet's goroutines, collector statuses, versions). Files
// larger than MaxFileBytes are not decoded and the snapshot says so.
package diff

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/internal/jsonstream"
	"github.com/nodesnap/nodesnap/read/analyze"
	"github.com/nodesnap/nodesnap/read/goroutinedump"
)

// MaxFileBytes bounds each bundle file decoded for a snapshot; a larger
// one is skipped and named in Snapshot.Skipped.
const MaxFileBytes = 64 << 20

// Bounds on what a snapshot keeps of one bundle.
const (
	maxKept      = 20_000
	maxLargest   = 50
	metricsLine  = 4096
	maxSkipNotes = 50
)

// Snapshot is what a diff compares of one bundle.
type Snapshot struct {
	Path       string            `json:"path"`
	Report     *analyze.Report   `json:"-"`
	Manifest   *bundle.Manifest  `json:"-"`
	Hostname   string            `json:"hostname"`
	BootID     string            `json:"boot_id,omitempty"`
	Kernel     string            `json:"kernel,omitempty"`
	Kubelet    string            `json:"kubelet_version,omitempty"`
	Runtimes   map[string]string `json:"runtime_versions,omitempty"`
	Obfuscated []string          `json:"obfuscated,omitempty"`
	// HostMounts are the host namespace's mounts: mountpoint → fstype.
	HostMounts map[string]string `json:"-"`
	// ForeignDevices are devices mounted only outside the host namespace:
	// dev → "fstype source".
	ForeignDevices map[string]string `json:"-"`
	// Hung are hung mounts (manifest and mountprobe).
	Hung map[string]bool `json:"-"`
	// DState are tasks in D state: "pid comm" → wchan.
	DState map[string]string `json:"-"`
	// Pods are the kubelet's pods (or the runtime's sandboxes): uid →
	// pod.
	Pods map[string]Pod `json:"-"`
	// Containers are CRI containers: "pod uid/name" → attempt.
	Containers map[string]uint32 `json:"-"`
	// Dirs are dirshape's largest directories: path → entries (the best
	// figure, layout.DirShapeDir.Size); DirsAtLeast holds the paths whose
	// figure is a lower bound (a scan stopped at its budget: "at least").
	// Deleting is .deleting~ names per root.
	Dirs        map[string]uint64 `json:"-"`
	DirsAtLeast map[string]bool   `json:"-"`
	Deleting    map[string]uint64 `json:"-"`
	// Goroutines counts the kubelet's goroutines (debug=2 dump) by their
	// first frame outside Go's standard library; GoroutineTotal is all.
	Goroutines     map[string]int `json:"-"`
	GoroutineTotal int            `json:"-"`
	// Seen names the sources the bundle holds (mounts, tasks, pods,
	// containers, dirshape): a source missing from either bundle is not
	// compared.
	Seen map[string]bool `json:"-"`
	// Skipped lists files not decoded (too large, unreadable).
	Skipped []string `json:"skipped,omitempty"`
}

// Pod is one pod as a snapshot keeps it.
type Pod struct {
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
	Phase     string `json:"phase,omitempty"`
}

// Label names a pod for a report.
func (p Pod) Label(uid string) string {
	if p.Name == "" {
		return uid
	}
	return p.Namespace + "/" + p.Name
}

// ErrInvalid is wrapped when a bundle is readable but does not validate
// (a file's checksum or size differs from the manifest's, the manifest
// does not match its schema): what it holds cannot be trusted to compare.
var ErrInvalid = errors.New("the bundle does not validate")

// Load reads a bundle into a Snapshot. Whatever `nodesnap validate`
// refuses (unsafe entries, a truncated archive, another schema, a checksum
// that differs) is refused here, with its words.
func Load(ctx context.Context, p string) (*Snapshot, error) {
	s := &Snapshot{Path: p,
		HostMounts: map[string]string{}, ForeignDevices: map[string]string{}, Hung: map[string]bool{},
		DState: map[string]string{}, Pods: map[string]Pod{}, Containers: map[string]uint32{},
		Dirs: map[string]uint64{}, Deleting: map[string]uint64{}, Runtimes: map[string]string{},
		Seen: map[string]bool{}, Goroutines: map[string]int{}}
	// One pass over the archive (an archive, or a directory holding an
	// extracted bundle) for the three readers: validation, analyze and
	// the snapshot's own indexes.
	var rep *analyze.Report
	errs := bundle.Fan(ctx, p, bundle.DefaultLimits,
		func(walk bundle.WalkFunc) error { _, err := bundle.ValidateWalk(walk); return err },
		func(walk bundle.WalkFunc) error {
			var err error
			rep, err = analyze.AnalyzeWalk(ctx, analyze.Options{}, walk)
			return err
		},
		func(walk bundle.WalkFunc) error { return s.read(ctx, walk) })
	if err := errs[0]; err != nil {
		if errors.Is(err, bundle.ErrInvalid) && !errors.Is(err, bundle.ErrUnsafe) {
			// Not bundle.ErrInvalid itself: for diff, exit status 3
			// means "worse", not "invalid".
			return nil, fmt.Errorf("reading bundle %s: %w (nodesnap validate %s lists every problem): %s", p, ErrInvalid, p,
				strings.TrimPrefix(err.Error(), bundle.ErrInvalid.Error()+": "))
		}
		return nil, fmt.Errorf("reading bundle %s: %w", p, err)
	}
	for _, err := range errs[1:] {
		if err != nil {
			return nil, fmt.Errorf("reading bundle %s: %w", p, err)
		}
	}
	rep.Bundle = p
	s.Report, s.Hostname, s.Kernel = rep, rep.Hostname, rep.Kernel
	return s, nil
}

// read is the snapshot's pass over a bundle's entries.
func (s *Snapshot) read(ctx context.Context, walk func(func(bundle.Entry) error) error) error {
	podsFromKubelet := false
	var criPods map[string]Pod
	var manifestHung []string
	probesSeen := false
	err := walk(func(e bundle.Entry) error {
		if e.Name == bundle.ManifestName {
			raw, err := io.ReadAll(io.LimitReader(e.Reader, bundle.MaxManifestBytes+1))
			if err != nil {
				return err
			}
			m, err := bundle.ParseManifest(raw)
			if err != nil {
				return bundle.Stop(err)
			}
			s.Manifest = m
			s.BootID = m.Host.BootID
			for _, h := range m.HungMounts {
				if len(manifestHung) < maxKept {
					manifestHung = append(manifestHung, h.Target)
				}
			}
			s.Obfuscated = m.Redaction.Obfuscated
			return nil
		}
		dir, base := path.Split(e.Name)
		want := e.Name == layout.MountsPath || e.Name == layout.TasksPath ||
			e.Name == layout.ProbesPath || e.Name == layout.ShapePath ||
			e.Name == layout.KubeletPodsPath || e.Name == layout.RuntimeSummaryPath ||
			(strings.HasPrefix(e.Name, layout.DirRuntime+"/") && (base == layout.CRIPodsFile || base == layout.CRIContainersFile)) ||
			(dir == layout.DirKubelet+"/" && strings.HasPrefix(base, layout.KubeletMetricsPrefix)) ||
			e.Name == layout.KubeletGoroutineDebug2Path
		if !want {
			return nil
		}
		if e.Size > MaxFileBytes {
			s.skip(fmt.Sprintf("%s: %d bytes, over the %d bytes diff decodes", e.Name, e.Size, MaxFileBytes))
			return nil
		}
		var err error
		switch {
		case e.Name == layout.MountsPath:
			err = s.readMounts(e.Reader)
		case e.Name == layout.TasksPath:
			err = s.readTasks(e.Reader)
		case e.Name == layout.ProbesPath:
			probesSeen = true
			err = s.readProbes(e.Reader)
		case e.Name == layout.ShapePath:
			err = s.readShape(e.Reader)
		case e.Name == layout.KubeletPodsPath:
			podsFromKubelet = true
			err = s.readKubeletPods(e.Reader)
		case e.Name == layout.RuntimeSummaryPath:
			err = s.readRuntimeSummary(e.Reader)
		case base == layout.CRIPodsFile:
			if criPods == nil {
				criPods = map[string]Pod{}
			}
			err = readCRIPods(e.Reader, criPods)
		case base == layout.CRIContainersFile:
			err = s.readCRIContainers(e.Reader)
		case e.Name == layout.KubeletGoroutineDebug2Path:
			var n int
			n, err = goroutinedump.Count(e.Reader, s.Goroutines)
			s.GoroutineTotal += n
		case strings.HasPrefix(base, layout.KubeletMetricsPrefix):
			err = s.readKubeletMetrics(e.Reader)
		}
		if err != nil {
			if errors.Is(err, bundle.ErrUnsafe) || ctx.Err() != nil {
				return err
			}
			s.skip(fmt.Sprintf("%s: could not be decoded: %v", e.Name, err))
			return nil
		}
		if src := sourceOf(e.Name); src != "" {
			s.Seen[src] = true
		}
		return nil
	})
	if err != nil {
		return err
	}
	if s.Manifest == nil {
		return fmt.Errorf("%w: the archive is empty", analyze.ErrNotBundle)
	}
	// mountprobe names hung mounts by mountpoint; the manifest by the
	// path probed. Without a probe file, the manifest's list stands.
	if !probesSeen {
		for _, h := range manifestHung {
			s.Hung[h] = true
		}
	}
	if !podsFromKubelet && criPods != nil {
		for uid, p := range criPods {
			s.Pods[uid] = p
		}
		s.Seen[SourcePods] = true
	}
	return nil
}

// Sources a snapshot may lack.
const (
	SourceMounts     = "mounts"
	SourceTasks      = "tasks"
	SourcePods       = "pods"
	SourceContainers = "containers"
	SourceDirshape   = "dirshape"
	SourceGoroutines = "goroutines"
)

// sourceOf names the source a decoded file provides ("" for none that a
// diff must see on both sides).
func sourceOf(name string) string {
	switch base := path.Base(name); {
	case name == layout.MountsPath:
		return SourceMounts
	case name == layout.TasksPath:
		return SourceTasks
	case name == layout.KubeletPodsPath:
		return SourcePods
	case name == layout.ShapePath:
		return SourceDirshape
	case base == layout.CRIContainersFile:
		return SourceContainers
	case name == layout.KubeletGoroutineDebug2Path:
		return SourceGoroutines
	}
	return ""
}

func (s *Snapshot) skip(why string) {
	if len(s.Skipped) < maxSkipNotes {
		s.Skipped = append(s.Skipped, why)
	}
}

// readMounts keeps the host namespace's mounts and the devices mounted
// only outside it, one namespace and one device at a time.
func (s *Snapshot) readMounts(r io.Reader) error {
	dec := json.NewDecoder(jsonstream.Compact(r))
	var hostNS uint64
	// Format 2: the tables, and the host's if it names one (resolved at
	// the end: the tables may come after the namespaces).
	tables := map[string][]Mount{}
	kept := 0
	var hostTable string
	err := jsonstream.WalkObject(dec, func(key string) error {
		switch key {
		case "format":
			var f int
			if err := dec.Decode(&f); err != nil {
				return err
			}
			return layout.CheckMountsFormat(f)
		case "host_namespace":
			return dec.Decode(&hostNS)
		case "tables":
			return jsonstream.WalkArray(dec, func() error {
				var t struct {
					Hash   string `json:"hash"`
					Mounts []struct {
						MountPoint string `json:"mount_point"`
						FSType     string `json:"fs_type"`
					} `json:"mounts"`
				}
				if err := dec.Decode(&t); err != nil {
					return err
				}
				if _, dup := tables[t.Hash]; dup || kept >= maxKept {
					return nil
				}
				ms := make([]Mount, 0, min(len(t.Mounts), maxKept-kept))
				for _, m := range t.Mounts[:cap(ms)] {
					ms = append(ms, Mount{Mountpoint: m.MountPoint, FSType: m.FSType})
				}
				kept += len(ms)
				tables[t.Hash] = ms
				return nil
			})
		case "namespaces":
			return jsonstream.WalkArray(dec, func() error {
				t, err := s.readNamespace(dec, hostNS)
				if t != "" {
					hostTable = t
				}
				return err
			})
		case "devices":
			return jsonstream.WalkArray(dec, func() error {
				var d layout.MountDevice
				if err := dec.Decode(&d); err != nil {
					return err
				}
				if d.OnlyOutsideHostNamespace && len(s.ForeignDevices) < maxKept {
					s.ForeignDevices[d.Dev] = strings.TrimSpace(strings.Join(d.FSTypes, ",") + " " + strings.Join(d.Sources, ","))
				}
				return nil
			})
		}
		return jsonstream.SkipValue(dec)
	})
	if err != nil {
		return err
	}
	if hostTable != "" {
		ms, ok := tables[hostTable]
		if !ok {
			return fmt.Errorf("the host's mount table %q is not in mounts.json", hostTable)
		}
		s.keepHostMounts(ms)
	}
	return jsonstream.EndOfInput(dec)
}

// readNamespace reads one namespace of mounts.json, keeping its mounts
// if it is the host's (which it says before or after them). When the
// host's names its table instead (format 2), it returns the table's hash.
func (s *Snapshot) readNamespace(dec *json.Decoder, hostNS uint64) (hostTable string, err error) {
	var inode uint64
	var host bool
	var table string
	var mounts []Mount
	err = jsonstream.WalkObject(dec, func(key string) error {
		switch key {
		case "inode":
			return dec.Decode(&inode)
		case "host":
			return dec.Decode(&host)
		case "table":
			return dec.Decode(&table)
		case "mounts":
			return jsonstream.WalkArray(dec, func() error {
				var m struct {
					MountPoint string `json:"mount_point"`
					FSType     string `json:"fs_type"`
				}
				if err := dec.Decode(&m); err != nil {
					return err
				}
				if len(mounts) < maxKept {
					mounts = append(mounts, Mount{Mountpoint: m.MountPoint, FSType: m.FSType})
				}
				return nil
			})
		}
		return jsonstream.SkipValue(dec)
	})
	if err != nil || !(host || (hostNS != 0 && inode == hostNS)) {
		return "", err
	}
	if table != "" && mounts == nil {
		return table, nil
	}
	s.keepHostMounts(mounts)
	return "", nil
}

func (s *Snapshot) keepHostMounts(mounts []Mount) {
	for _, m := range mounts {
		if len(s.HostMounts) < maxKept {
			s.HostMounts[m.Mountpoint] = m.FSType
		}
	}
}

// readTasks keeps the tasks in D state, one task at a time.
func (s *Snapshot) readTasks(r io.Reader) error {
	dec := json.NewDecoder(jsonstream.Compact(r))
	err := jsonstream.WalkArray(dec, func() error {
		var t struct {
			TID   int    `json:"tid"`
			Comm  string `json:"comm"`
			State string `json:"state"`
			Wchan string `json:"wchan"`
		}
		if err := dec.Decode(&t); err != nil {
			return err
		}
		if t.State == "D" && len(s.DState) < maxKept {
			s.DState[fmt.Sprintf("%d %s", t.TID, t.Comm)] = t.Wchan
		}
		return nil
	})
	if err != nil {
		return err
	}
	return jsonstream.EndOfInput(dec)
}

func (s *Snapshot) readProbes(r io.Reader) error {
	var p struct {
		Probes []layout.MountProbe `json:"probes"`
	}
	if err := json.NewDecoder(jsonstream.Compact(r)).Decode(&p); err != nil {
		return err
	}
	for _, pr := range p.Probes {
		if pr.Result == layout.ProbeHung && len(s.Hung) < maxKept {
			s.Hung[pr.Mountpoint] = true
		}
	}
	return nil
}

func (s *Snapshot) readShape(r io.Reader) error {
	var d layout.DirShapeReport
	if err := json.NewDecoder(jsonstream.Compact(r)).Decode(&d); err != nil {
		return err
	}
	for _, root := range d.Roots {
		s.Deleting[root.Path] = root.DeletingCount
		for _, l := range root.Largest {
			if len(s.Dirs) < maxKept {
				s.Dirs[l.Path] = l.Size()
				if l.LowerBound() {
					if s.DirsAtLeast == nil {
						s.DirsAtLeast = map[string]bool{}
					}
					s.DirsAtLeast[l.Path] = true
				}
			}
		}
	}
	return nil
}

func (s *Snapshot) readKubeletPods(r io.Reader) error {
	var pl struct {
		Items []struct {
			Metadata struct {
				UID       string `json:"uid"`
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
			Status struct {
				Phase string `json:"phase"`
			} `json:"status"`
		} `json:"items"`
	}
	if err := json.NewDecoder(jsonstream.Compact(r)).Decode(&pl); err != nil {
		return err
	}
	for _, p := range pl.Items {
		if p.Metadata.UID != "" && len(s.Pods) < maxKept {
			s.Pods[p.Metadata.UID] = Pod{Namespace: p.Metadata.Namespace, Name: p.Metadata.Name, Phase: p.Status.Phase}
		}
	}
	return nil
}

func readCRIPods(r io.Reader, into map[string]Pod) error {
	var pl struct {
		Items []struct {
			Metadata struct {
				UID       string `json:"uid"`
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
			State string `json:"state"`
		} `json:"items"`
	}
	if err := json.NewDecoder(jsonstream.Compact(r)).Decode(&pl); err != nil {
		return err
	}
	for _, p := range pl.Items {
		m := p.Metadata
		if m.UID == "" || len(into) >= maxKept {
			continue
		}
		if old, seen := into[m.UID]; seen && old.Phase == "SANDBOX_READY" {
			continue
		}
		into[m.UID] = Pod{Namespace: m.Namespace, Name: m.Name, Phase: p.State}
	}
	return nil
}

func (s *Snapshot) readCRIContainers(r io.Reader) error {
	var cl struct {
		Containers []struct {
			PodSandboxID string `json:"podSandboxId"`
			Metadata     struct {
				Name    string `json:"name"`
				Attempt uint32 `json:"attempt"`
			} `json:"metadata"`
			Labels map[string]string `json:"labels"`
		} `json:"containers"`
	}
	if err := json.NewDecoder(jsonstream.Compact(r)).Decode(&cl); err != nil {
		return err
	}
	for _, c := range cl.Containers {
		pod := c.Labels["io.kubernetes.pod.namespace"] + "/" + c.Labels["io.kubernetes.pod.name"]
		if pod == "/" {
			pod = c.PodSandboxID
		}
		key := pod + "/" + c.Metadata.Name
		if old, ok := s.Containers[key]; (!ok && len(s.Containers) < maxKept) || c.Metadata.Attempt > old {
			s.Containers[key] = c.Metadata.Attempt
		}
	}
	return nil
}

func (s *Snapshot) readRuntimeSummary(r io.Reader) error {
	var sum layout.RuntimeSummary
	if err := json.NewDecoder(jsonstream.Compact(r)).Decode(&sum); err != nil {
		return err
	}
	for _, rt := range sum.Runtimes {
		if rt.CRIRuntimeVersion != "" {
			s.Runtimes[rt.Name] = strings.TrimSpace(rt.CRIRuntimeName + " " + rt.CRIRuntimeVersion)
		}
	}
	return nil
}

// readKubeletMetrics finds kubernetes_build_info's git_version.
func (s *Snapshot) readKubeletMetrics(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, metricsLine), metricsLine)
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasPrefix(l, "kubernetes_build_info{") {
			continue
		}
		if _, rest, ok := strings.Cut(l, `git_version="`); ok {
			if v, _, ok := strings.Cut(rest, `"`); ok {
				s.Kubelet = v
				return nil
			}
		}
	}
	if errors.Is(sc.Err(), bufio.ErrTooLong) {
		return nil // a long label set elsewhere: no version to learn
	}
	return sc.Err()
}
