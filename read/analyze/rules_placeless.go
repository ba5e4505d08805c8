package analyze

import (
	"slices"
	"sort"
	"strings"
)

// A kubelet's record cut before its pod (a thread's last pasted line, a
// journal's length limit) still names the pod's volume by the name the
// pod's spec gives it ("data", "postgres-data"): a name that is unique
// only within its pod, so alone it is no object, and its finding would
// call it a pod. When the evidence holds one pod with a volume of that
// name failing the same way, the record is that pod's.

// podLocalVolume is the volume a group names by its pod-local name
// alone, without a pod: "" when the group names its pod, or names the
// volume globally (a PV, a handle, a plugin's unique name).
func podLocalVolume(g *opGroup) string {
	if g == nil {
		return ""
	}
	k := g.keys
	kind, v := k.Object()
	if kind != "volume" || v != k.Volume || k.Pod != "" || k.PodUID != "" || v == "" ||
		strings.HasPrefix(v, "pvc-") || strings.ContainsAny(v, "/^:# ") {
		return ""
	}
	return v
}

// foldPlaceless moves the evidence of each finding at idx (named only by
// a pod-local volume) into the one other finding of its ID about that
// volume of a pod, and drops it; with none or several such findings it
// stays as it is.
func (st *state) foldPlaceless(idx []int) {
	if len(idx) == 0 {
		return
	}
	drop := map[int]bool{}
	for _, i := range idx {
		f := st.findings[i]
		into := -1
		for j, g := range st.findings {
			if j == i || drop[j] || g.ID != f.ID || !namesVolumeOfPod(g.Subject+"\n"+g.Summary, f.Subject) {
				continue
			}
			if into >= 0 {
				into = -2
				break
			}
			into = j
		}
		if into < 0 {
			continue
		}
		g := &st.findings[into]
		g.Evidence = mergeEvidence(g.Evidence, f.Evidence)
		g.Summary += "; a record cut before its pod names " + f.Subject + " too"
		drop[i] = true
	}
	if len(drop) == 0 {
		return
	}
	kept := st.findings[:0]
	for i, f := range st.findings {
		if !drop[i] {
			kept = append(kept, f)
		}
	}
	st.findings = kept
}

// namesVolumeOfPod says whether text names the volume v of a pod ("v of
// pod ns/name"), v a whole name ("data" is not named by "metadata of
// pod").
func namesVolumeOfPod(text, v string) bool {
	marker := v + " of pod "
	for at := 0; ; {
		i := strings.Index(text[at:], marker)
		if i < 0 {
			return false
		}
		i += at
		if i == 0 || !strings.ContainsRune("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.", rune(text[i-1])) {
			return true
		}
		at = i + len(marker)
	}
}

// mergeEvidence adds b's lines to a's evidence of the same file, in line
// order without repeats, and b's other files after a's.
func mergeEvidence(a, b []Evidence) []Evidence {
	out := append([]Evidence(nil), a...)
	for _, e := range b {
		at := -1
		for k := range out {
			if out[k].Path == e.Path && out[k].Record == nil && e.Record == nil {
				at = k
				break
			}
		}
		if at < 0 {
			out = append(out, e)
			continue
		}
		m := &out[at]
		lines := append([]Line(nil), m.Lines...)
		for _, l := range e.Lines {
			if !slices.ContainsFunc(lines, func(x Line) bool { return x.N == l.N }) {
				lines = append(lines, l)
			}
		}
		sort.SliceStable(lines, func(x, y int) bool { return lines[x].N < lines[y].N })
		m.Lines = lines
		m.More += e.More
	}
	return out
}
