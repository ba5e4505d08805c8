package analyze

import (
	"strings"

	"github.com/nodesnap/nodesnap/signatures"
)

// Lines are matched with the signature catalogue (package signatures),
// the one `nodesnap watch` uses too: a line is tested against the
// classes' words (plain byte search) and only a line that matched is read
// for its objects (pod, volume, device, path, server).

// evidenceOnlySigs match ordinary lines that are evidence only beside a
// finding: they make none alone and are not counted in the report's
// signatures (nodesnap diff would show every pod deletion).
var evidenceOnlySigs = func() map[string]bool {
	out := map[string]bool{}
	for _, c := range signatures.Classes {
		if c.EvidenceOnly {
			out[c.ID] = true
		}
	}
	return out
}()

// lineHit says where the first hit of a line whose class keeps a trace
// (a kernel call trace follows) was kept.
type lineHit struct {
	trace bool
	kh    *keyHits
	at    int
}

// matchLine files one log record under every signature it matches; nil
// when it matches none. b is the record's text (a structured record as
// klog text), raw the record as written, which is what is kept. meta is
// parsed once, on the first match.
func (x *logIndex) matchLine(path string, n int, b, raw []byte, cut bool, decoded []string, meta **logMeta) *lineHit {
	var buf [4]*signatures.Class
	cs := signatures.MatchIDs(buf[:0], b)
	if len(cs) == 0 {
		return nil
	}
	if *meta == nil {
		m := parseLogMeta(b, x.ref)
		*meta = &m
	}
	obj := signatures.Extract(b)
	out := &lineHit{}
	for _, c := range cs {
		if !mayMatch(c, path, *meta) {
			continue
		}
		h := logHit{Path: path, Line: keepLine(n, raw, cut), Meta: **meta}
		if len(decoded) > 0 {
			h.Line.Decoded = strings.Join(decoded, "\n")
		}
		kh := x.get(c.ID).add(c.KeyOf(b, obj), h, decoded)
		if kh == nil {
			continue
		}
		kh.Objects = mergeObjects(kh.Objects, obj)
		if c.Trace && len(kh.First) > 0 && kh.First[len(kh.First)-1].Line.N == n && kh.First[len(kh.First)-1].Path == path {
			out.trace, out.kh, out.at = true, kh, len(kh.First)-1
		}
	}
	return out
}

// mergeObjects fills what a has not from b.
func mergeObjects(a, b signatures.Objects) signatures.Objects {
	fill := func(x *string, y string) {
		if *x == "" {
			*x = y
		}
	}
	fill(&a.PodUID, b.PodUID)
	fill(&a.Pod, b.Pod)
	fill(&a.Volume, b.Volume)
	fill(&a.Device, b.Device)
	fill(&a.Path, b.Path)
	fill(&a.Server, b.Server)
	fill(&a.Task, b.Task)
	return a
}
