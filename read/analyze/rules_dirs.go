package analyze

import (
	"fmt"
	"path"
	"regexp"
	"strings"

	"github.com/nodesnap/nodesnap/bundle/layout"
)

// Incidents 000 and 001: directories that grow without bound.
//
// 000: the kubelet renames a volume directory to <name>.deleting~<random>
// before removing it; each removal that fails (EBUSY: still mounted
// somewhere) leaves one behind, and the volume reconciler then works on
// every one of them: hundreds per volume, pods take minutes to change.
//
// 001: a container leaked 5 million empty directories into a Docker
// volume; ext4 reports st_nlink 1 once a directory has more than 64,998
// subdirectories. Removing it ran for hours in unlinkat while holding the
// volume driver's lock (see rules_runtime.go).

// IDs of this family.
const (
	idDeleting      = "volume-dir-deleting-leftovers"
	idHugeDir       = "huge-directory"
	idNlinkOverflow = "ext4-nlink-overflow"
)

// What each finding of this file means, for docs/findings.md.
var _ = document(
	RuleDoc{
		ID: "volume-dir-deleting-leftovers", Severity: "warning or critical",
		Title:    "Leaked <volume>.deleting~NNN directories",
		Meaning:  "A volume plugin renames a volume directory to `<name>.deleting~NNN` before removing it; when the removal fails (the original still mounted somewhere, often in another mount namespace) the renamed directories pile up, one per retry, and the volume is never cleaned up.",
		Evidence: "`dirshape/shape.json`: the leftovers per parent directory; the mount table and holders for the original.",
		Fix:      "Find what keeps the original mounted and unmount it there; then remove the empty leftovers (`find PARENT -maxdepth 1 -name 'NAME.deleting~*' -type d -empty -delete`). Newer kubelets remove volume directories in place.",
		Incident: "incident 000",
	},
	RuleDoc{
		ID: "huge-directory", Severity: "warning or critical",
		Title:    "A directory past 100,000 entries",
		Meaning:  "A directory under the kubelet's, runtime's or CSI tree holds hundreds of thousands of entries. Listing or removing it takes minutes to hours, and a runtime that removes it under a lock (dockerd's volume removal) blocks every container create and delete meanwhile.",
		Evidence: "`dirshape/shape.json`: the largest directories with their entry counts, and the processes with files open in them.",
		Fix:      "Find and stop the writer first; empty it in the background, outside any runtime lock (`ionice -c3 find DIR -mindepth 1 -delete`); move such data off an image VOLUME into a Kubernetes volume.",
		Incident: "incident 001",
	},
	RuleDoc{
		ID: "ext4-nlink-overflow", Severity: "warning or critical",
		Title:    "ext4's subdirectory link limit reached",
		Meaning:  "On ext4 a directory's link count stops counting at 64,998 subdirectories (it reads 1 from then on): `mkdir` there fails with \"Too many links\" unless the dir_nlink feature is on, and tools that trust the count go wrong.",
		Evidence: "`dirshape/shape.json`: the directory's nlink and subdirectory count.",
		Fix:      "As for huge-directory: stop the writer and empty the directory in the background; spread such data over several directories.",
		Incident: "incident 001",
	},
)

// Thresholds: a directory of a node's kubelet, runtime or CSI trees with
// this many entries is abnormal; the second is incident 001's scale.
const (
	hugeDirEntries     = 100_000
	hugeDirCritical    = 1_000_000
	deletingCritical   = 100
	maxWritersInResult = 8
)

func ruleDirectories(st *state) {
	st.deletingLeftovers()
	st.deletingFromLogs()
	st.hugeDirectories()
}

// deletingGroup is the leftovers of one parent directory, from dirshape
// or (when dirshape is missing) the csi inventory.
type deletingGroup struct {
	parent    string
	count     int
	empty     int
	notEmpty  int
	unknown   int
	originals []layout.DeletingOriginal
	evidence  []Evidence
}

func (st *state) deletingGroups() []*deletingGroup {
	var out []*deletingGroup
	seen := map[string]bool{}
	if st.shape != nil {
		for _, r := range st.shape.Roots {
			for _, g := range r.Deleting {
				if seen[g.Parent] {
					continue
				}
				seen[g.Parent] = true
				rec := g
				if len(rec.Entries) > 5 {
					rec.Entries = rec.Entries[:5]
					rec.EntriesOmitted += uint64(len(g.Entries) - 5)
				}
				out = append(out, &deletingGroup{parent: g.Parent, count: int(g.Count), empty: int(g.Empty), notEmpty: int(g.NotEmpty),
					unknown: int(g.Unknown), originals: g.Originals,
					evidence: []Evidence{{Path: layout.ShapePath, What: "the .deleting~ leftovers in this directory, grouped by original", Record: rec}}})
			}
		}
	}
	if st.csi != nil {
		byParent := map[string]*deletingGroup{}
		var order []string
		for _, pv := range st.csi.PodVolumes {
			if !pv.DeletingLeftover {
				continue
			}
			parent := path.Dir(pv.Dir)
			if seen[parent] {
				continue
			}
			g := byParent[parent]
			if g == nil {
				g = &deletingGroup{parent: parent}
				byParent[parent] = g
				order = append(order, parent)
			}
			g.count++
			g.unknown++
			orig, _, _ := layout.ParseDeletingName(pv.Volume)
			found := false
			for i := range g.originals {
				if g.originals[i].Name == orig {
					g.originals[i].Count++
					found = true
				}
			}
			if !found {
				g.originals = append(g.originals, layout.DeletingOriginal{Name: orig, Count: 1})
			}
			if len(g.evidence) < 5 {
				g.evidence = append(g.evidence, Evidence{Path: layout.CSIInventoryPath, What: "a .deleting~ leftover among the pod's volumes", Record: pv})
			}
		}
		for _, p := range order {
			out = append(out, byParent[p])
		}
	}
	return out
}

func (st *state) deletingLeftovers() {
	for _, g := range st.deletingGroups() {
		var mountedOrigs, origs []string
		var stillMounted []mountRec
		for _, o := range g.originals {
			origs = append(origs, fmt.Sprintf("%s ×%d", o.Name, o.Count))
			full := path.Join(g.parent, o.Name)
			ms := st.mountsUnder(full)
			if o.Mounted || len(ms) > 0 {
				mountedOrigs = append(mountedOrigs, o.Name)
				stillMounted = append(stillMounted, ms...)
			}
		}
		sev := Warning
		if g.count >= deletingCritical {
			sev = Critical
		}
		f := Finding{
			ID:       idDeleting,
			Severity: sev,
			Title:    "Leaked .deleting~ directories in a pod's volume directory",
			Subject:  g.parent,
			Summary: fmt.Sprintf("%s in %s (%d empty, %d not empty, %d not checked)", plural(g.count, ".deleting~ leftover", ".deleting~ leftovers"),
				g.parent, g.empty, g.notEmpty, g.unknown),
		}
		if len(mountedOrigs) > 0 {
			f.Summary += "; the original " + listOf(mountedOrigs, 2) + " is still mounted"
		} else {
			f.Summary += "; the original is not mounted"
		}
		var b strings.Builder
		fmt.Fprintf(&b, "The kubelet tears a volume directory down by renaming it to <name>.deleting~<random> and removing that; each removal that fails leaves one behind. "+
			"%s pile up here (%s). The volume reconciler adds every one to its actual state and tries to unmount it, so each reconciler loop slows down "+
			"and pods on the node take minutes to start or stop (incident 000; kubernetes#43534, #45935). ", plural(g.count, "leftover", "leftovers"), listOf(origs, 4))
		if len(mountedOrigs) > 0 {
			b.WriteString("The original volume is still mounted: the removals fail with \"device or resource busy\" because something keeps it mounted, and a new leftover appears on every retry. ")
			var foreign []string
			self := st.selfNamespaces()
			for _, m := range stillMounted {
				if !m.Host && self[m.NS] == "" {
					foreign = append(foreign, fmt.Sprintf("%s in namespace %d", m.MountPoint, m.NS))
				}
			}
			if len(foreign) > 0 {
				b.WriteString("It is mounted in another mount namespace: " + listOf(foreign, 3) + " (see mount-held-in-foreign-namespace). ")
			}
		} else {
			b.WriteString("The original is no longer mounted, so the leftovers are garbage that only slows the kubelet down. ")
		}
		f.Explanation = strings.TrimSpace(b.String())
		f.Evidence = append(f.Evidence, g.evidence...)
		f.Evidence = append(f.Evidence, st.mountinfoEvidence(stillMounted, "the original volume, still mounted")...)
		tokens := []string{g.parent}
		for _, o := range g.originals {
			tokens = append(tokens, path.Join(g.parent, o.Name))
			if len(o.Name) >= 12 {
				tokens = append(tokens, o.Name+".deleting~")
			}
		}
		st.claimLogs(&f, tokens, sigDeleting, sigTeardownBusy, sigRmdirBusy, sigOrphanedPod)
		if len(mountedOrigs) > 0 {
			for _, o := range mountedOrigs {
				f.Remediation = append(f.Remediation, "Find what keeps the original mounted before anything else: grep "+shellQuote(o)+" /proc/*/task/*/mountinfo (or read mounts/mounts.json and openfiles/holders.json in this bundle), and unmount it there.")
			}
		}
		for _, o := range g.originals {
			f.Remediation = append(f.Remediation, fmt.Sprintf("Remove the empty leftovers once the original is unmounted in every namespace: find %s -maxdepth 1 -name %s -type d -empty -delete",
				shellQuote(g.parent), shellQuote(o.Name+".deleting~*")))
		}
		if g.notEmpty > 0 || g.unknown > 0 {
			f.Remediation = append(f.Remediation, "Leftovers that are not empty: check they are not mountpoints (findmnt -R "+shellQuote(g.parent)+") and hold nothing you need before rm -r.")
		}
		f.Remediation = append(f.Remediation, "Upgrade the volume plugin (or kubelet) that renames before removing: newer kubelets remove volume directories in place.")
		st.add(f)
	}
}

// hugeDir is a directory worth a finding, with the root it was found
// under.
type hugeDir struct {
	root layout.DirShapeRoot
	dir  layout.DirShapeDir
}

// hugeDirs returns the directories past the thresholds or ext4's link
// limit, once each.
func (st *state) hugeDirs() []hugeDir {
	if st.shape == nil {
		return nil
	}
	var out []hugeDir
	seen := map[string]bool{}
	for _, r := range st.shape.Roots {
		var dirs []layout.DirShapeDir
		dirs = append(dirs, r.NlinkAnomalies...)
		dirs = append(dirs, r.Largest...)
		for _, d := range dirs {
			if seen[d.Path] || (!d.NlinkAnomaly && d.Size() < hugeDirEntries) {
				continue
			}
			seen[d.Path] = true
			out = append(out, hugeDir{root: r, dir: d})
		}
	}
	return out
}

func (st *state) hugeDirectories() {
	for _, h := range st.hugeDirs() {
		st.hugeDirFinding(h.root, h.dir)
	}
}

func (st *state) hugeDirFinding(r layout.DirShapeRoot, d layout.DirShapeDir) {
	id, title := idHugeDir, "Huge directory"
	if d.NlinkAnomaly {
		id, title = idNlinkOverflow, "Directory past ext4's subdirectory link limit"
	}
	sev := Warning
	if d.Size() >= hugeDirCritical {
		sev = Critical
	}
	lower := ""
	if d.LowerBound() || r.CountsAreLowerBounds {
		lower = "at least "
	}
	if d.LowerBound() && d.EstimatedEntries > d.Entries {
		lower = fmt.Sprintf("about %d by its inode and at least ", d.EstimatedEntries)
	}
	f := Finding{
		ID:       id,
		Severity: sev,
		Title:    title,
		Subject:  d.Path,
		Summary: fmt.Sprintf("%s holds %s%d entries (%d subdirectories; directory inode %d bytes, st_nlink %d)",
			d.Path, lower, d.Entries, d.Subdirs, d.InodeSize, d.Nlink),
	}
	var b strings.Builder
	if d.NlinkAnomaly {
		fmt.Fprintf(&b, "The directory has more than 64,998 subdirectories, so ext4 stopped counting them in its link count (st_nlink is %d). ", d.Nlink)
	}
	b.WriteString("A directory this large makes everything that walks it slow: removing it (os.RemoveAll of a volume or a container) runs for hours in unlinkat, " +
		"and a container runtime doing so under its volume lock blocks every other container create and delete on the node (incident 001: 5 million empty directories in a Docker volume). " +
		"Its inode never shrinks on ext4 even after entries are removed. ")
	writers := st.writersIn(r, d.Path)
	if len(writers) > 0 {
		var names []string
		for _, w := range writers {
			names = append(names, fmt.Sprintf("%s (%s %s)", st.procName(w.PID, w.Comm), w.Use, w.Path))
		}
		b.WriteString("Processes with files or their working directory in it, likely writing there: " + listOf(names, 4) + ".")
	} else if st.present[layout.OpenFilesProcessesPath] && st.writersDropped == 0 {
		b.WriteString("No process had a file open in it when the bundle was taken.")
	}
	f.Explanation = strings.TrimSpace(b.String())
	f.Evidence = append(f.Evidence, Evidence{Path: layout.ShapePath, What: "the directory's shape (scanned root " + r.Path + ")", Record: d})
	if len(writers) > 0 {
		ev := Evidence{Path: layout.OpenFilesProcessesPath, What: "processes with files or their working directory in the directory (line: their line in the file)"}
		if len(writers) > maxWritersInResult {
			ev.More = len(writers) - maxWritersInResult
			writers = writers[:maxWritersInResult]
		}
		ev.Record = writers
		f.Evidence = append(f.Evidence, ev)
	}
	st.claimLogs(&f, []string{d.Path}, sigUnlinkatBusy)
	f.Remediation = []string{
		"Find and stop the writer first (the processes above, or: ls -lt " + shellQuote(d.Path) + " | head to see what is being created).",
		"Empty it in the background, outside any runtime lock, gently: ionice -c3 find " + shellQuote(d.Path) + " -mindepth 1 -delete",
		"If it is a Docker VOLUME of an image, move that data to a Kubernetes volume (emptyDir or a PVC) and clean it up in the application.",
	}
	st.add(f)
}

// writersIn returns the processes with a file or working directory inside
// dir: host processes by path; processes in other namespaces by the
// filesystem-relative path of their file (the mount's root plus the path
// below its mount point), when it is on the scanned root's device.
func (st *state) writersIn(r layout.DirShapeRoot, dir string) []writerRec {
	byID := map[nsMount]*mountRec{}
	for i := range st.mounts {
		m := &st.mounts[i]
		byID[nsMount{m.NS, m.ID}] = m
	}
	relDir, _ := fsRelative(r, dir)
	var out []writerRec
	// nodesnap's own workers (dirshape's, walking the directory) are not
	// who fills it.
	self := st.selfPIDs()
	for _, w := range st.writers {
		if self[w.PID] {
			continue
		}
		if w.Namespace == st.hostNS || st.hostNS == 0 {
			if _, ok := pathWithin(w.Path, dir, false); ok {
				out = append(out, w)
			}
			continue
		}
		if relDir == "" || w.Dev == "" || w.Dev != r.Dev {
			continue
		}
		m := byID[nsMount{w.Namespace, w.MountID}]
		if m == nil {
			continue
		}
		below, ok := pathWithin(w.Path, m.MountPoint, false)
		if m.MountPoint == "/" {
			below, ok = w.Path, true
		}
		if !ok {
			continue
		}
		rel := path.Join(m.Root, below)
		if _, ok := pathWithin(rel, relDir, false); ok || relDir == "/" {
			out = append(out, w)
		}
	}
	return out
}

// reAnyUID finds a pod UID anywhere in a line.
var reAnyUID = regexp.MustCompile(`[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`)

// reDeletingName finds a leftover's name in a line.
var reDeletingName = regexp.MustCompile(`[^\s/"\\]+\.deleting~[0-9]+`)

// rePodVolumes finds a pod's directory in a path a log line names.
var rePodVolumes = regexp.MustCompile(`(/\S*?/pods/([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}))/volumes?`)

// deletingFromLogs names incident 000 from the kubelet's log alone, when
// no directory count says how many leftovers there are: lines naming
// <volume>.deleting~NNN directories (the renames that failed, the
// "orphaned volume" each became), grouped by pod. A complete directory
// count of the tree that finds none makes them history (info).
func (st *state) deletingFromLogs() {
	s := st.logs.sigs[sigDeleting]
	if s == nil {
		return
	}
	type podGroup struct {
		uid, dir string
		depth    int
		lines    int
		keys     []*keyHits
	}
	groups := map[string]*podGroup{}
	var order []string
	for _, k := range s.unclaimed() {
		uid, dir := "", ""
		depth := 0
		for _, h := range k.hits() {
			t := h.Line.Text
			if m := rePodVolumes.FindStringSubmatch(t); m != nil && uid == "" {
				dir, uid = m[1], m[2]
			}
			if uid == "" {
				uid = reAnyUID.FindString(t)
			}
			depth = max(depth, strings.Count(t[:min(len(t), 2048)], ".deleting~"))
		}
		if uid == "" {
			uid = k.Key
		}
		if uid == "" && len(k.First) > 0 {
			// No pod and no path: the leftover's own name.
			uid = reDeletingName.FindString(k.First[0].Line.Text)
		}
		if uid == "" {
			uid = "(not named in the log lines)"
		}
		g := groups[uid]
		if g == nil {
			g = &podGroup{uid: uid, dir: dir}
			groups[uid] = g
			order = append(order, uid)
		}
		if g.dir == "" {
			g.dir = dir
		}
		g.depth = max(g.depth, depth)
		g.lines += k.Count
		g.keys = append(g.keys, k)
	}
	for _, uid := range order {
		g := groups[uid]
		subject, whose := uid, "pod "+uid
		if g.dir != "" {
			subject = g.dir + "/volumes"
		}
		if !reAnyUID.MatchString(uid) {
			whose = uid
		}
		if uid == "" {
			// Lines that name neither the pod nor a path.
			whose = "(not named in the log lines)"
			if subject == "" {
				subject = whose
			}
		}
		f := Finding{ID: idDeleting, Severity: Warning, Title: "Leaked .deleting~ directories named in the kubelet's log", Subject: subject,
			Summary: fmt.Sprintf("the kubelet's log names .deleting~ leftovers of %s (%s, names up to %d .deleting~ deep); counted from the logs alone, no directory count in this bundle",
				whose, plural(g.lines, "line", "lines"), g.depth),
			Explanation: "Each failed removal of a volume directory leaves a <name>.deleting~NNN directory, and the kubelet then tries to tear that one down too, renaming it again: " +
				"names nested several .deleting~ deep mean the removals fail over and over (incident 000; kubernetes#43534, #45935). This finding comes from log lines only: " +
				"how many leftovers are on disk now is unknown (collect with the dirshape collector for the count).",
		}
		if st.shapeCovers(g.dir) {
			f.Severity = Info
			f.Summary = fmt.Sprintf("earlier: the kubelet's log names .deleting~ leftovers of %s (%s), but the complete directory count of this bundle finds none there now", whose, plural(g.lines, "line", "lines"))
		}
		for _, k := range g.keys {
			k.claimed = true
			f.addEvidence(k.evidence(sigWhat[sigDeleting])...)
		}
		st.claimLogs(&f, []string{uid}, sigTeardownBusy, sigOrphanedPod, sigRmdirBusy)
		f.Remediation = []string{
			"Count the leftovers: find " + shellQuote(orUnknown(g.dir)) + " -maxdepth 3 -name '*.deleting~*' | wc -l",
			"Find what keeps the original volume mounted (grep " + shellQuote(uid) + " /proc/*/task/*/mountinfo) and unmount it there; then remove the empty leftovers (find ... -name '*.deleting~*' -type d -empty -delete).",
		}
		st.add(f)
	}
}

// shapeCovers says whether dirshape counted, completely, the tree that
// holds dir (a pod's directory): its leftovers would be in the count.
func (st *state) shapeCovers(dir string) bool {
	if st.shape == nil || dir == "" {
		return false
	}
	for _, r := range st.shape.Roots {
		if r.Complete && (dir == r.Path || strings.HasPrefix(dir, strings.TrimSuffix(r.Path, "/")+"/")) {
			return true
		}
	}
	return false
}
