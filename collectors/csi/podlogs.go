package csi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors/hostfs"
	"github.com/nodesnap/nodesnap/internal/human"
)

// The CSI driver pods' own container logs: which pods are drivers, and the newest lines of each container.

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
		if !errors.Is(err, fs.ErrNotExist) {
			c.inv.Errors = append(c.inv.Errors, fmt.Sprintf("listing the pod log directory %s: %v", root, err))
		}
		return
	}
	words := csiDriverWords(c.inv.Drivers)
	plugins := c.pluginPods(ctx)
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
		// What the pod mounts first; its name only where its
		// containers' configs could not be read.
		match := plugins[ref.UID]
		if match == "" {
			match = CSIPodMatch(ref.Pod, containers, words)
		}
		if match == "" {
			continue
		}
		csiPods++
		// Two pods of one name (a StatefulSet's pod deleted and created
		// again) keep apart by their UIDs.
		bdir := layout.CSIPodLogsDir + csiSafeName(ref.Namespace+"_"+ref.Pod)
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
			human.Bytes(kept), len(c.inv.PodLogs), csiPods, human.Bytes(c.opts.PodLogBytes))
	}
}

// containerLogs keeps the newest bytes of one container's logs: its
// current instance's files, then its previous instance's, newest first.
func (c *csiRun) containerLogs(ctx context.Context, ref PodLogDirName, dir, container, bundleDir, match string) layout.CSIPodLog {
	pl := layout.CSIPodLog{Namespace: ref.Namespace, Pod: ref.Pod, PodUID: ref.UID, Container: container, Dir: dir, Match: match, Files: []layout.CSIPodLogFile{}}
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
		lf := layout.CSIPodLogFile{Name: f.name, Path: path.Join(dir, f.name), Restart: f.Restart, Instance: "older",
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
			case err != nil && errors.Is(err, fs.ErrNotExist):
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
func (c *csiRun) podLogFile(ctx context.Context, lf *layout.CSIPodLogFile, max int64, bundleDir string) error {
	r, err := c.env.Host().Tail(ctx, hostfs.Path(lf.Path), max)
	if err != nil {
		lf.Error = err.Error()
		if !errors.Is(err, fs.ErrNotExist) {
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
		f.MarkTruncated()
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
