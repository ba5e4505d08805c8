package diff

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/nodesnap/nodesnap/read/analyze"
)

// Diff is what changed from the Old bundle to the New one. Empty lists
// mean no change; every list is sorted, so two runs print the same.
type Diff struct {
	Old Side `json:"old"`
	New Side `json:"new"`
	// HostsDiffer is set when the bundles come from different hosts (or
	// different boots of one host: then BootChanged).
	HostsDiffer bool `json:"hosts_differ"`
	BootChanged bool `json:"boot_changed,omitempty"`
	// ObfuscationDiffers is set when the bundles were obfuscated for
	// different value classes: tokens of one do not match the other's.
	ObfuscationDiffers bool `json:"obfuscation_differs,omitempty"`

	FindingsNew     []FindingRef    `json:"findings_new"`
	FindingsGone    []FindingRef    `json:"findings_gone"`
	FindingsChanged []FindingChange `json:"findings_changed"`

	HungNew  []string `json:"hung_mounts_new"`
	HungGone []string `json:"hung_mounts_gone"`

	ForeignDevicesNew  []string `json:"foreign_devices_new"`
	ForeignDevicesGone []string `json:"foreign_devices_gone"`

	HostMountsAdded   []Mount `json:"host_mounts_added"`
	HostMountsRemoved []Mount `json:"host_mounts_removed"`
	// HostMountsByType counts the two lists per filesystem type.
	HostMountsByType []TypeCount `json:"host_mounts_by_fstype"`

	DStateNew  []string `json:"d_state_new"`
	DStateGone []string `json:"d_state_gone"`

	PodsAdded        []string      `json:"pods_added"`
	PodsRemoved      []string      `json:"pods_removed"`
	PodPhaseChanges  []ValueChange `json:"pod_phase_changes"`
	ContainerRestart []CountChange `json:"containers_restarted"`

	DirGrowth      []CountChange `json:"dir_growth"`
	DeletingChange []CountChange `json:"deleting_changes"`
	Signatures     []CountChange `json:"log_signatures"`
	// LogWindowDiffers is set when the bundles' logs reach back over
	// different spans (--since): signature counts then compare windows of
	// different lengths.
	LogWindowDiffers bool `json:"log_window_differs,omitempty"`
	// Goroutines are the kubelet's goroutine counts by first frame
	// outside Go's standard library, "(all)" for the total.
	Goroutines []CountChange `json:"kubelet_goroutines"`

	BundleStatus *ValueChange  `json:"bundle_status,omitempty"`
	Collectors   []ValueChange `json:"collector_statuses"`
	Versions     []ValueChange `json:"versions"`
	// Notes are what could not be compared (files not decoded).
	Notes []string `json:"notes,omitempty"`

	// Worse is set when a finding of severity warning or critical
	// appeared, or an existing finding rose to one: `nodesnap diff` then
	// exits 3.
	Worse bool `json:"worse"`
}

// Side is one bundle at a glance.
type Side struct {
	Bundle      string            `json:"bundle"`
	Hostname    string            `json:"hostname"`
	BootID      string            `json:"boot_id,omitempty"`
	CollectedAt time.Time         `json:"collected_at"`
	Status      string            `json:"status"`
	Findings    map[string]int    `json:"findings"`
	Kernel      string            `json:"kernel,omitempty"`
	Kubelet     string            `json:"kubelet_version,omitempty"`
	Runtimes    map[string]string `json:"runtime_versions,omitempty"`
	Obfuscated  []string          `json:"obfuscated,omitempty"`
	// LogWindowSeconds is the collection's --since.
	LogWindowSeconds float64 `json:"log_window_seconds,omitempty"`
}

// FindingRef names a finding.
type FindingRef struct {
	ID       string           `json:"id"`
	Subject  string           `json:"subject,omitempty"`
	Severity analyze.Severity `json:"severity"`
	Summary  string           `json:"summary"`
}

// FindingChange is a finding present in both with another severity.
type FindingChange struct {
	ID      string           `json:"id"`
	Subject string           `json:"subject,omitempty"`
	Old     analyze.Severity `json:"old"`
	New     analyze.Severity `json:"new"`
	Summary string           `json:"summary"`
}

// TypeCount is how many mounts of one filesystem type came and went.
type TypeCount struct {
	FSType  string `json:"fstype"`
	Added   int    `json:"added"`
	Removed int    `json:"removed"`
}

// Mount is a mountpoint of the host namespace and its filesystem type.
type Mount struct {
	Mountpoint string `json:"mountpoint"`
	FSType     string `json:"fstype"`
}

// ValueChange is one named value before and after ("" for absent).
type ValueChange struct {
	Name string `json:"name"`
	Old  string `json:"old"`
	New  string `json:"new"`
}

// CountChange is one named count before and after.
type CountChange struct {
	Name string `json:"name"`
	Old  uint64 `json:"old"`
	New  uint64 `json:"new"`
	// OldAtLeast and NewAtLeast say the count is a lower bound: the
	// directory was not read to its end (dirshape's budget).
	OldAtLeast bool `json:"old_at_least,omitempty"`
	NewAtLeast bool `json:"new_at_least,omitempty"`
}

// OldText and NewText write the counts, "at least N" for a lower bound.
func (c CountChange) OldText() string { return countText(c.Old, c.OldAtLeast) }

// NewText: see OldText.
func (c CountChange) NewText() string { return countText(c.New, c.NewAtLeast) }

func countText(n uint64, atLeast bool) string {
	if atLeast {
		return "at least " + strconv.FormatUint(n, 10)
	}
	return strconv.FormatUint(n, 10)
}

// Changed reports whether anything worth a reader's attention changed
// (hosts and obfuscation aside).
func (d *Diff) Changed() bool {
	return len(d.FindingsNew)+len(d.FindingsGone)+len(d.FindingsChanged)+len(d.HungNew)+len(d.HungGone)+
		len(d.ForeignDevicesNew)+len(d.ForeignDevicesGone)+len(d.HostMountsAdded)+len(d.HostMountsRemoved)+
		len(d.DStateNew)+len(d.DStateGone)+len(d.PodsAdded)+len(d.PodsRemoved)+len(d.PodPhaseChanges)+
		len(d.ContainerRestart)+len(d.DirGrowth)+len(d.DeletingChange)+len(d.Signatures)+len(d.Goroutines)+
		len(d.Collectors)+len(d.Versions) > 0 || d.BundleStatus != nil
}

func side(s *Snapshot) Side {
	return Side{Bundle: s.Path, Hostname: s.Hostname, BootID: s.BootID, CollectedAt: s.Report.CollectedAt,
		Status: s.Report.BundleStatus, Findings: s.Report.Counts, Kernel: s.Kernel, Kubelet: s.Kubelet,
		Runtimes: s.Runtimes, Obfuscated: s.Obfuscated, LogWindowSeconds: s.Manifest.Settings.SinceSeconds}
}

// Compare computes what changed from a to b.
func Compare(a, b *Snapshot) *Diff {
	d := &Diff{Old: side(a), New: side(b)}
	d.HostsDiffer = a.Hostname != b.Hostname
	d.BootChanged = !d.HostsDiffer && a.BootID != "" && b.BootID != "" && a.BootID != b.BootID
	d.ObfuscationDiffers = fmt.Sprint(a.Obfuscated) != fmt.Sprint(b.Obfuscated)

	compareFindings(d, a.Report.Findings, b.Report.Findings)

	d.HungNew, d.HungGone = setDiff(a.Hung, b.Hung)
	both := func(src, what string) bool {
		switch {
		case a.Seen[src] && b.Seen[src]:
			return true
		case a.Seen[src]:
			d.Notes = append(d.Notes, what+": only in the old bundle, not compared")
		case b.Seen[src]:
			d.Notes = append(d.Notes, what+": only in the new bundle, not compared")
		}
		return false
	}
	if both(SourceMounts, "mount tables (mounts/mounts.json)") {
		compareMounts(d, a, b)
	}
	if both(SourceTasks, "tasks (processes/tasks.json)") {
		// A task is the same task whatever it waits on now.
		d.DStateNew, d.DStateGone = setDiff(keys(a.DState), keys(b.DState))
		for i, k := range d.DStateNew {
			if w := b.DState[k]; w != "" {
				d.DStateNew[i] = k + " in " + w
			}
		}
	}
	if both(SourcePods, "pods (kubelet/pods.json or the runtime's pod sandboxes)") {
		comparePods(d, a, b)
	}
	if both(SourceContainers, "CRI containers (runtime/*/cri-containers.json)") {
		for _, k := range slices.Sorted(maps.Keys(b.Containers)) {
			if old, ok := a.Containers[k]; ok && b.Containers[k] > old {
				d.ContainerRestart = append(d.ContainerRestart, CountChange{Name: k, Old: uint64(old), New: uint64(b.Containers[k])})
			}
		}
	}
	if both(SourceDirshape, "directory shapes (dirshape/shape.json)") {
		compareDirs(d, a, b)
	}
	if both(SourceGoroutines, "the kubelet's goroutines (kubelet/goroutine-debug2.txt)") {
		add := func(name string, o, n int) {
			if notable(o, n) {
				d.Goroutines = append(d.Goroutines, CountChange{Name: name, Old: uint64(o), New: uint64(n)})
			}
		}
		add("(all)", a.GoroutineTotal, b.GoroutineTotal)
		for _, f := range unionKeys(a.Goroutines, b.Goroutines) {
			add(f, a.Goroutines[f], b.Goroutines[f])
		}
	}
	for _, id := range unionKeys(a.Report.Signatures, b.Report.Signatures) {
		o, n := a.Report.Signatures[id], b.Report.Signatures[id]
		if o != n {
			d.Signatures = append(d.Signatures, CountChange{Name: id, Old: uint64(o), New: uint64(n)})
		}
	}
	d.LogWindowDiffers = d.Old.LogWindowSeconds != d.New.LogWindowSeconds
	compareCollection(d, a, b)
	for _, n := range a.Skipped {
		d.Notes = append(d.Notes, "old bundle: "+n)
	}
	for _, n := range b.Skipped {
		d.Notes = append(d.Notes, "new bundle: "+n)
	}
	return d
}

func compareMounts(d *Diff, a, b *Snapshot) {
	fa, fb := labelled(a.ForeignDevices), labelled(b.ForeignDevices)
	d.ForeignDevicesNew, d.ForeignDevicesGone = setDiff(fa, fb)
	for _, mp := range slices.Sorted(maps.Keys(b.HostMounts)) {
		if old, ok := a.HostMounts[mp]; !ok || old != b.HostMounts[mp] {
			d.HostMountsAdded = append(d.HostMountsAdded, Mount{mp, b.HostMounts[mp]})
		}
	}
	for _, mp := range slices.Sorted(maps.Keys(a.HostMounts)) {
		if nw, ok := b.HostMounts[mp]; !ok || nw != a.HostMounts[mp] {
			d.HostMountsRemoved = append(d.HostMountsRemoved, Mount{mp, a.HostMounts[mp]})
		}
	}
	sortMounts(d.HostMountsAdded)
	sortMounts(d.HostMountsRemoved)
	by := map[string]*TypeCount{}
	get := func(t string) *TypeCount {
		if by[t] == nil {
			by[t] = &TypeCount{FSType: t}
		}
		return by[t]
	}
	for _, m := range d.HostMountsAdded {
		get(m.FSType).Added++
	}
	for _, m := range d.HostMountsRemoved {
		get(m.FSType).Removed++
	}
	for _, t := range slices.Sorted(maps.Keys(by)) {
		d.HostMountsByType = append(d.HostMountsByType, *by[t])
	}
}

func comparePods(d *Diff, a, b *Snapshot) {
	for _, uid := range slices.Sorted(maps.Keys(b.Pods)) {
		p := b.Pods[uid]
		old, ok := a.Pods[uid]
		switch {
		case !ok:
			d.PodsAdded = append(d.PodsAdded, p.Label(uid)+phaseSuffix(p.Phase))
		case old.Phase != p.Phase:
			d.PodPhaseChanges = append(d.PodPhaseChanges, ValueChange{p.Label(uid), old.Phase, p.Phase})
		}
	}
	for _, uid := range slices.Sorted(maps.Keys(a.Pods)) {
		if _, ok := b.Pods[uid]; !ok {
			d.PodsRemoved = append(d.PodsRemoved, a.Pods[uid].Label(uid)+phaseSuffix(a.Pods[uid].Phase))
		}
	}
	sort.Strings(d.PodsAdded)
	sort.Strings(d.PodsRemoved)
}

func compareDirs(d *Diff, a, b *Snapshot) {
	// The best figures are compared (a count cut short by dirshape's
	// budget, or its inode's estimate when larger: DirShapeDir.Size), and
	// a lower bound is said to be one.
	for _, p := range slices.Sorted(maps.Keys(b.Dirs)) {
		old, nw := a.Dirs[p], b.Dirs[p]
		if nw > old && nw-old >= max(dirGrowthMin, old/10) {
			d.DirGrowth = append(d.DirGrowth, CountChange{Name: p, Old: old, New: nw, OldAtLeast: a.DirsAtLeast[p], NewAtLeast: b.DirsAtLeast[p]})
		}
	}
	sort.SliceStable(d.DirGrowth, func(i, j int) bool {
		return d.DirGrowth[i].New-d.DirGrowth[i].Old > d.DirGrowth[j].New-d.DirGrowth[j].Old
	})
	for _, r := range unionKeys(a.Deleting, b.Deleting) {
		if a.Deleting[r] != b.Deleting[r] {
			d.DeletingChange = append(d.DeletingChange, CountChange{Name: r, Old: a.Deleting[r], New: b.Deleting[r]})
		}
	}
}

func compareCollection(d *Diff, a, b *Snapshot) {
	if a.Report.BundleStatus != b.Report.BundleStatus {
		d.BundleStatus = &ValueChange{"bundle", a.Report.BundleStatus, b.Report.BundleStatus}
	}
	ca, cb := map[string]string{}, map[string]string{}
	for _, c := range a.Manifest.Collectors {
		ca[c.Name] = c.Status
	}
	for _, c := range b.Manifest.Collectors {
		cb[c.Name] = c.Status
	}
	for _, n := range unionKeys(ca, cb) {
		if ca[n] != cb[n] {
			d.Collectors = append(d.Collectors, ValueChange{n, orAbsent(ca[n]), orAbsent(cb[n])})
		}
	}
	addVersion := func(what, o, n string) {
		if o != n {
			d.Versions = append(d.Versions, ValueChange{what, o, n})
		}
	}
	addVersion("kernel", a.Kernel, b.Kernel)
	addVersion("kubelet", a.Kubelet, b.Kubelet)
	for _, rt := range unionKeys(a.Runtimes, b.Runtimes) {
		addVersion(rt, a.Runtimes[rt], b.Runtimes[rt])
	}
}

// notable reports whether a goroutine count moved enough to say: by at
// least goroutineMin and by half. A kubelet's goroutines come and go by
// the dozen between any two dumps; a stuck one piles hundreds on a frame.
func notable(o, n int) bool {
	d := n - o
	if d < 0 {
		d = -d
	}
	return d >= goroutineMin && 2*d >= max(o, n)
}

// goroutineMin is the least change of a goroutine count reported.
const goroutineMin = 10

// dirGrowthMin is the least growth of a directory's entries worth
// reporting (and a tenth of its size before): a busy node's directories
// move by a few entries between any two collections.
const dirGrowthMin = 100

func compareFindings(d *Diff, old, nw []analyze.Finding) {
	type key struct{ id, subject string }
	idx := func(fs []analyze.Finding) map[key]analyze.Finding {
		m := map[key]analyze.Finding{}
		for _, f := range fs {
			k := key{f.ID, f.Subject}
			if prev, ok := m[k]; !ok || f.Severity > prev.Severity {
				m[k] = f
			}
		}
		return m
	}
	oi, ni := idx(old), idx(nw)
	ref := func(f analyze.Finding) FindingRef {
		return FindingRef{ID: f.ID, Subject: f.Subject, Severity: f.Severity, Summary: f.Summary}
	}
	for k, f := range ni {
		o, ok := oi[k]
		switch {
		case !ok:
			d.FindingsNew = append(d.FindingsNew, ref(f))
			if f.Severity >= analyze.Warning {
				d.Worse = true
			}
		case o.Severity != f.Severity:
			d.FindingsChanged = append(d.FindingsChanged, FindingChange{f.ID, f.Subject, o.Severity, f.Severity, f.Summary})
			if f.Severity > o.Severity && f.Severity >= analyze.Warning {
				d.Worse = true
			}
		}
	}
	for k, f := range oi {
		if _, ok := ni[k]; !ok {
			d.FindingsGone = append(d.FindingsGone, ref(f))
		}
	}
	sortRefs(d.FindingsNew)
	sortRefs(d.FindingsGone)
	sort.Slice(d.FindingsChanged, func(i, j int) bool {
		a, b := d.FindingsChanged[i], d.FindingsChanged[j]
		if a.ID != b.ID {
			return a.ID < b.ID
		}
		return a.Subject < b.Subject
	})
}

func sortRefs(fs []FindingRef) {
	sort.Slice(fs, func(i, j int) bool {
		a, b := fs[i], fs[j]
		if a.Severity != b.Severity {
			return a.Severity > b.Severity
		}
		if a.ID != b.ID {
			return a.ID < b.ID
		}
		return a.Subject < b.Subject
	})
}

func sortMounts(ms []Mount) {
	sort.Slice(ms, func(i, j int) bool {
		if ms[i].FSType != ms[j].FSType {
			return ms[i].FSType < ms[j].FSType
		}
		return ms[i].Mountpoint < ms[j].Mountpoint
	})
}

// labelled turns key → detail into "key detail" set members.
func labelled(m map[string]string) map[string]bool {
	out := make(map[string]bool, len(m))
	for k, v := range m {
		if v == "" {
			out[k] = true
		} else {
			out[k+" "+v] = true
		}
	}
	return out
}

func keys(m map[string]string) map[string]bool {
	out := make(map[string]bool, len(m))
	for k := range m {
		out[k] = true
	}
	return out
}

// setDiff returns the members only in b and only in a, sorted.
func setDiff(a, b map[string]bool) (added, removed []string) {
	for k := range b {
		if !a[k] {
			added = append(added, k)
		}
	}
	for k := range a {
		if !b[k] {
			removed = append(removed, k)
		}
	}
	sort.Strings(added)
	sort.Strings(removed)
	return added, removed
}

func unionKeys[V any](a, b map[string]V) []string {
	seen := map[string]bool{}
	for k := range a {
		seen[k] = true
	}
	for k := range b {
		seen[k] = true
	}
	return slices.Sorted(maps.Keys(seen))
}

func orAbsent(s string) string {
	if s == "" {
		return "absent"
	}
	return s
}

func phaseSuffix(p string) string {
	if p == "" {
		return ""
	}
	return " (" + p + ")"
}
