package analyze

import (
	"strings"
	"time"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/read/events"
)

// Every log record is read into an event (package events) as well as
// matched against the signatures: its operation, the objects it names,
// its error or its success. Failures are grouped by operation and
// object, successes kept per object, so that a rule can tell an
// operation still failing at the end of the evidence from one that
// recovered, and name every failing object whether or not a signature
// knows the driver's wording. Bounded: maxOpGroups groups, maxSuccessKeys
// objects with a success.

const (
	maxOpGroups    = 2000
	maxSuccessKeys = 20_000
	// stillFailingFor: a failure this close to the end of its log, with
	// no success after it, is an operation still failing. The kubelet
	// retries a volume operation at least every 2m2s, so a failure older
	// than this with nothing after it stopped failing.
	stillFailingFor = 5 * time.Minute
)

// opGroup is the failures of one operation on one object, from one
// writer (scopeOps merges writers once the out-of-scope ones are set
// aside).
type opGroup struct {
	// hits holds the lines, times and count; its Key is the object.
	hits *keyHits
	op   events.Op
	kind string
	keys events.Keys
	// newest is the newest failure's error; permanent says why the
	// error is permanent by nature ("" when none was).
	newest    events.Error
	permanent string
	// lastSeq orders the last failure among all records; lastPath is
	// the log it was in.
	lastSeq  int
	lastPath string
	kubelet  bool
	sources  []string
}

// success is the newest success of an operation on an object.
type success struct {
	t   time.Time
	seq int
}

// opIndex holds the events of every log.
type opIndex struct {
	groups map[string]*opGroup
	order  []string
	// successes are by object key, then operation.
	successes map[string]map[events.Op]success
	// ends are the newest time of each log (the end of its evidence).
	ends     map[string]time.Time
	seq      int
	overflow int
}

func newOpIndex() *opIndex {
	return &opIndex{groups: map[string]*opGroup{}, successes: map[string]map[events.Op]success{}, ends: map[string]time.Time{}}
}

// pendingEvent is a failure that named no object, waiting for the
// header-less lines after it (a mount's arguments and output) to name it.
type pendingEvent struct {
	ev   events.Event
	raw  []byte
	n    int
	cut  bool
	left int
}

// maxContinuation is how many records after a failure may name its
// object.
const maxContinuation = 6

// readEvent reads one record into an event and files it; it returns the
// failure still waiting for its object, if any, and whether the record is
// a CSI call's success (no signature may read it as a failure: a driver
// that logs each call with its result and an empty error).
func (x *logIndex) readEvent(p *events.Parser, pend *pendingEvent, path string, n int, raw []byte, cut bool) (*pendingEvent, bool) {
	if pend != nil {
		keys, cont := p.Continuation(raw)
		pend.ev.Keys.Merge(keys)
		switch {
		case pend.ev.Storage():
			x.noteEvent(path, pend.n, pend.raw, pend.cut, &pend.ev)
			return nil, false
		case !cont:
			pend = nil
		default:
			if pend.left--; pend.left <= 0 {
				pend = nil
			}
		}
	}
	ev, ok := p.Parse(raw)
	callOK := ev.Outcome == events.OutcomeSucceeded && ev.Method != ""
	switch {
	case ok:
		x.noteEvent(path, n, raw, cut, &ev)
		return nil, callOK
	case ev.Incomplete():
		return &pendingEvent{ev: ev, raw: append([]byte(nil), raw...), n: n, cut: cut, left: maxContinuation}, false
	}
	return pend, callOK
}

// note files one event read from the record at line n of path.
func (x *logIndex) noteEvent(path string, n int, raw []byte, cut bool, ev *events.Event) {
	o := x.ops
	o.seq++
	if ev.Outcome == events.OutcomeSucceeded {
		for _, k := range ev.Keys.All() {
			m := o.successes[k]
			if m == nil {
				if len(o.successes) >= maxSuccessKeys {
					continue
				}
				m = map[events.Op]success{}
				o.successes[k] = m
			}
			if s, ok := m[ev.Op]; !ok || !ev.Time.Before(s.t) {
				m[ev.Op] = success{t: ev.Time, seq: o.seq}
			}
		}
		return
	}
	kind, obj := ev.Keys.Object()
	if obj == "" {
		return
	}
	meta := parseLogMeta(logRecordText(raw), x.ref)
	if ev.Op == events.OpIO && strings.HasPrefix(path, layout.DirJournal+"/") && meta.PID != 0 && meta.Ident != "kernel" && !storageDaemons[meta.Ident] {
		// A program's line quoting the kernel, or claiming to be it, is
		// not the kernel's I/O error (as for the kernel's signatures).
		return
	}
	if meta.Time.IsZero() {
		meta.Time = ev.Time
	}
	if csiLog(path) {
		// A driver's own log: mount-utils or controller-runtime lines
		// in it are not the kubelet's.
		ev.Kubelet = false
	} else if ev.Kubelet && meta.Ident == "" {
		meta.Ident = "kubelet"
	}
	h := logHit{Path: path, Line: keepLine(n, raw, cut), Meta: meta}
	origin := meta.origin()
	ik := string(ev.Op) + "\x00" + obj + "\x00" + origin.String()
	g := o.groups[ik]
	if g == nil {
		if len(o.groups) >= maxOpGroups {
			o.overflow++
			return
		}
		g = &opGroup{hits: &keyHits{Key: obj, origin: origin}, op: ev.Op, kind: kind}
		o.groups[ik] = g
		o.order = append(o.order, ik)
	}
	kh := g.hits
	kh.Count++
	if t := meta.Time; !t.IsZero() {
		if kh.Oldest.IsZero() || t.Before(kh.Oldest) {
			kh.Oldest = t
		}
		if !t.Before(kh.Newest) {
			kh.Newest = t
		}
	}
	if len(kh.First) < maxKeyHits {
		kh.First = append(kh.First, h)
	} else {
		kh.Last = &h
	}
	g.keys.Merge(ev.Keys)
	g.newest = ev.Err
	if p, why := ev.Permanent(); p && g.permanent == "" {
		g.permanent = why
	}
	g.lastSeq, g.lastPath = o.seq, path
	// The kubelet's own process wrote the record (its journal or
	// syslog prefix, or its content): a mount's output it quotes on a
	// line of its own is the kubelet's operation.
	g.kubelet = g.kubelet || ev.Kubelet || (meta.Ident == "kubelet" || meta.Ident == "" && path == kubeletLogFile) && !csiLog(path)
	if ev.Source != "" && !contains(g.sources, ev.Source) && len(g.sources) < 4 {
		g.sources = append(g.sources, ev.Source)
	}
}

// kubeletLogFile is the kubelet's own log (its unit's journal, or the
// file it writes when journald is absent): a record in it without a
// prefix of another program is the kubelet's.
var kubeletLogFile = layout.DirJournal + "/kubelet.log"

// storageDaemons are the daemons of the storage stack whose own lines
// report I/O failing (a multipath map without paths).
var storageDaemons = map[string]bool{"multipathd": true, "iscsid": true}

// csiLog tells a CSI driver's own log (its pod's container or a host
// process's log).
func csiLog(path string) bool {
	return strings.HasPrefix(path, layout.CSIPodLogsPath) || strings.HasPrefix(path, layout.CSIHostLogsPath)
}

// noteEnd keeps the time of a log's last record: the end of its
// evidence.
func (x *logIndex) noteEnd(path string, last []byte) {
	if len(last) == 0 {
		return
	}
	t := parseLogMeta(logRecordText(last), x.ref).Time
	if t.IsZero() {
		if ev, _ := events.NewParser(x.ref).Parse(last); !ev.Time.IsZero() {
			t = ev.Time
		}
	}
	if t.After(x.ops.ends[path]) {
		x.ops.ends[path] = t
	}
}

// succeededAfter says whether the operation (or one that completes it)
// succeeded on any of the group's objects after its last failure.
func (o *opIndex) succeededAfter(g *opGroup) bool {
	for _, k := range g.keys.All() {
		for op, s := range o.successes[k] {
			if !events.Resolves(op, g.op) {
				continue
			}
			if !s.t.IsZero() && !g.hits.Newest.IsZero() {
				if !s.t.Before(g.hits.Newest) {
					return true
				}
				continue
			}
			if s.seq > g.lastSeq {
				return true
			}
		}
	}
	return false
}
