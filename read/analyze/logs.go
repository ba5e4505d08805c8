package analyze

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"time"

	"github.com/nodesnap/nodesnap/read/events"
	"github.com/nodesnap/nodesnap/signatures"
)

// Log signatures: lines of the kubelet's, the runtime's and the kernel's
// logs that name a storage incident. Each log file is read once, line by
// line; a line is tested against every signature's literal first (cheap),
// and only then against its regular expression. What is kept per
// signature is bounded: a count and a few lines per key (volume, pod,
// device, server), however long the log.

// Signature IDs.
const (
	sigTeardownBusy     = "teardown-busy"
	sigUnmountDevice    = "unmount-device-failed"
	sigPodNotCleaned    = "pod-volumes-not-cleaned-up"
	sigOrphanedPod      = "orphaned-pod-volume-paths"
	sigOrphanedRemove   = "orphaned-pod-volumes-dir-not-removed"
	sigTeardownOK       = "teardown-succeeded"
	sigRmdirBusy        = "rmdir-volume-busy"
	sigPLEG             = "pleg-unhealthy"
	sigSyncLoop         = "syncloop-slow"
	sigOperationExists  = "csi-operation-exists"
	sigOtherReferences  = "still-mounted-by-other-references"
	sigUnlinkatBusy     = "unlinkat-busy"
	sigHungTask         = "kernel-hung-task"
	sigCephSessionLost  = "libceph-session-lost"
	sigNFSNotResponding = "nfs-not-responding"
	sigNFSOK            = "nfs-ok"
	sigTransportNotConn = "transport-not-connected"
	sigNotPublished     = "csi-not-published"
	sigNodeUnpublish    = "csi-node-unpublish"
	sigDeleting         = "deleting-dir"
	sigByteOutput       = "byte-array-output"
	// Signatures of the catalogue with no constant of their own above are
	// used by their IDs in rules_logs.go.
)

// logHit is one line that matched, where it is.
type logHit struct {
	Path string
	Line Line
	// Groups are the regular expression's submatches (nil without one).
	Groups []string
	// Trace are the continuation lines (kernel call trace).
	Trace []Line
	// Meta is where and when the line was written.
	Meta logMeta
}

// keyHits are the hits of one signature with one key (and, until
// scopeLogs merges them, one origin: program, pid, host, node named).
type keyHits struct {
	Key   string
	Count int
	// origin is the writer of these lines; Oldest and Newest the times of
	// the first and last of them that carry one.
	origin         logOrigin
	Oldest, Newest time.Time
	// First are the first hits (up to maxKeyHits); Last the latest.
	First []logHit
	Last  *logHit
	// Decoded are distinct byte-array outputs carried by the hits.
	Decoded []string
	// Objects are what the hits name beside the key (the first of each
	// kind): the subject of a finding whose key the lines do not carry.
	Objects signatures.Objects
	// claimed is set when a finding used these hits as its evidence.
	claimed bool
}

// sigHits are all hits of one signature.
type sigHits struct {
	Count int
	keys  map[string]*keyHits
	order []string
	// Overflow counts hits whose key was not kept (too many keys, or
	// the index's budget spent).
	Overflow int
	budget   *int
	// id is the signature; index the log index it is in.
	id    string
	index *logIndex
}

const (
	maxKeyHits  = 3
	maxSigKeys  = 2000
	maxTraceLen = 40
	maxDecoded  = 8
	// maxKeptHits bounds the lines kept over all signatures (each up to
	// maxLineKept bytes, plus a trace): a log of nothing but matching
	// lines costs at most a few tens of MiB.
	maxKeptHits = 10_000
)

// logIndex holds every signature's hits over every log file.
type logIndex struct {
	sigs map[string]*sigHits
	// ref is the collection's start: the year of log stamps without one.
	ref time.Time
	// devices is the newest time a device was attached or a filesystem on
	// it mounted, by kernel name ("loop0"): its current instance's start.
	devices map[string]time.Time
	// outside are the hits scopeLogs set aside: an earlier kubelet, before
	// the window, another node.
	outside []outsideHits
	// versions are the kubelet's start lines with its version.
	versions []loggedVersion
	// budget is how many more hits may be kept.
	budget int
	// dumps are the goroutine dumps found in logs; dumpBytes their size.
	dumps     []*loggedDump
	dumpBytes int
	// recoveries are the lines that end a transient event, by kind.
	recoveries map[string][]recoveryMark
	files      []string
	lines      int
	// ops are the storage operations' events of every log.
	ops *opIndex
	// touched, set while an analyzer runs under a test's watch, is
	// called with a signature whose unclaimed lines are read.
	touched func(sig string)
}

func newLogIndex() *logIndex {
	return &logIndex{sigs: map[string]*sigHits{}, devices: map[string]time.Time{}, budget: maxKeptHits, recoveries: map[string][]recoveryMark{}, ops: newOpIndex()}
}

// get returns a signature's hits (never nil).
func (x *logIndex) get(id string) *sigHits {
	s := x.sigs[id]
	if s == nil {
		s = &sigHits{keys: map[string]*keyHits{}, budget: &x.budget, id: id, index: x}
		x.sigs[id] = s
	}
	return s
}

// unclaimed returns the keys no finding has used yet.
func (s *sigHits) unclaimed() []*keyHits {
	if s.index != nil && s.index.touched != nil {
		s.index.touched(s.id)
	}
	var out []*keyHits
	for _, k := range s.order {
		if kh := s.keys[k]; !kh.claimed {
			out = append(out, kh)
		}
	}
	return out
}

func (s *sigHits) add(key string, h logHit, decoded []string) *keyHits {
	s.Count++
	o := h.Meta.origin()
	ik := key + "\x00" + o.String()
	kh := s.keys[ik]
	if kh == nil {
		if len(s.keys) >= maxSigKeys || *s.budget <= 0 {
			s.Overflow++
			return nil
		}
		kh = &keyHits{Key: key, origin: o}
		s.keys[ik] = kh
		s.order = append(s.order, ik)
	}
	kh.Count++
	if t := h.Meta.Time; !t.IsZero() {
		if kh.Oldest.IsZero() || t.Before(kh.Oldest) {
			kh.Oldest = t
		}
		if t.After(kh.Newest) {
			kh.Newest = t
		}
	}
	if len(kh.First) < maxKeyHits && *s.budget > 0 {
		*s.budget--
		kh.First = append(kh.First, h)
	} else if len(kh.First) >= maxKeyHits {
		hh := h
		kh.Last = &hh
	}
	for _, d := range decoded {
		if len(kh.Decoded) < maxDecoded && !contains(kh.Decoded, d) {
			kh.Decoded = append(kh.Decoded, d)
		}
	}
	return kh
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// hits returns the kept hits, first ones then the latest.
func (k *keyHits) hits() []logHit {
	out := append([]logHit(nil), k.First...)
	if k.Last != nil {
		out = append(out, *k.Last)
	}
	return out
}

// evidence turns key hits into evidence grouped by file.
func (k *keyHits) evidence(what string) []Evidence {
	byPath := map[string]*Evidence{}
	var order []string
	for _, h := range k.hits() {
		e := byPath[h.Path]
		if e == nil {
			e = &Evidence{Path: h.Path, What: what}
			byPath[h.Path] = e
			order = append(order, h.Path)
		}
		e.Lines = append(e.Lines, h.Line)
		e.Lines = append(e.Lines, h.Trace...)
	}
	out := make([]Evidence, 0, len(order))
	shown := len(k.hits())
	for i, p := range order {
		e := *byPath[p]
		if i == 0 && k.Count > shown {
			e.More = k.Count - shown
		}
		out = append(out, e)
	}
	return out
}

// scanLog reads one log file into the index, one record at a time (a
// message continued over several lines is one record; a structured one is
// read as klog's text format).
func (x *logIndex) scanLog(path string, r io.Reader) error {
	x.files = append(x.files, path)
	rr := newRecordReader(r)
	parser := events.NewParser(x.ref)
	var pend *pendingEvent
	// tracing: the hit whose call trace is being collected.
	var tracing *keyHits
	var traceHit int
	for {
		raw, n, cut, err := rr.next()
		if errors.Is(err, io.EOF) {
			// The record last returned is still rr.out: the end of
			// this log's evidence.
			x.noteEnd(path, rr.out)
			return nil
		}
		if err != nil {
			return err
		}
		x.lines++
		var callOK bool
		pend, callOK = x.readEvent(parser, pend, path, n, raw, cut)
		if callOK {
			continue
		}
		b := logRecordText(raw)
		if tracing != nil {
			if isTraceLine(b) && len(tracing.First[traceHit].Trace) < maxTraceLen {
				tracing.First[traceHit].Trace = append(tracing.First[traceHit].Trace, keepLine(n, raw, cut))
				continue
			}
			tracing = nil
		}
		if x.mayBeDump(b) {
			m := parseLogMeta(b, x.ref)
			if x.noteDumpText(path, &m, b) {
				continue
			}
		}
		x.noteDevice(b)
		x.noteRecovery(path, n, b)
		if bytes.Contains(b, []byte("kubeletVersion=")) {
			x.noteKubeletVersion(b)
		}
		matched := false
		var decoded []string
		var meta *logMeta
		if bytes.Contains(b, []byte("utput")) {
			decoded = decodeByteArrays(b)
		}
		if hit := x.matchLine(path, n, b, raw, cut, decoded, &meta); hit != nil {
			matched = true
			if hit.trace {
				tracing, traceHit = hit.kh, hit.at
			}
		}
		if !matched && len(decoded) > 0 {
			h := logHit{Path: path, Line: keepLine(n, raw, cut), Meta: parseLogMeta(b, x.ref)}
			h.Line.Decoded = strings.Join(decoded, "\n")
			x.get(sigByteOutput).add(strings.Join(decoded, "\n"), h, decoded)
		}
	}
}

// mayBeDump is a cheap test for a record that may belong to a goroutine
// dump: a dump is open, or the record names a goroutine.
func (x *logIndex) mayBeDump(b []byte) bool {
	return x.openDump() != nil || bytes.Contains(b, []byte("goroutine "))
}

// isTraceLine tells the lines that continue a kernel hung-task report:
// "Call Trace:", "<TASK>", " __schedule+0x1d5/0x5b0", "task:ls state:D ...",
// the "echo 0 > ..." hint; with or without a journal/dmesg prefix.
func isTraceLine(b []byte) bool {
	s := string(b)
	for _, m := range []string{"Call Trace", "<TASK>", "</TASK>", "+0x", "task:", "hung_task_timeout_secs", "Not tainted", "Tainted:"} {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

// eachUnclaimed calls fn for each key of a log signature that no
// correlated finding claimed, marking it claimed, up to
// maxLogFindingsPerID; the rest are summed up in one "not listed" finding.
func (st *state) eachUnclaimed(sig, id string, fn func(k *keyHits)) {
	s := st.logs.sigs[sig]
	if s == nil {
		return
	}
	ks := s.unclaimed()
	for i, k := range ks {
		if i == maxLogFindingsPerID {
			st.notListed(id, len(ks)-i, s.Overflow)
			return
		}
		k.claimed = true
		fn(k)
	}
}
