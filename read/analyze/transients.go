package analyze

import (
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// Transient events and their recovery. A libceph session lost and
// re-established milliseconds later, an NFS server "not responding" then
// "OK", a PLEG unhealthy then the node Ready again, an iSCSI connection
// error then "operational after recovery": the event is over. A signature
// whose every key saw its recovery after its last line is reported as one
// info finding, never a warning; an event whose recovery came before it (it
// happened again) still stands.

const idRecovered = "storage-event-recovered"

var _ = document(RuleDoc{
	ID: idRecovered, Severity: "info",
	Title:    "Transient storage events that recovered",
	Meaning:  "The logs show a storage event that ended on its own: a Ceph monitor session lost and established again, an NFS server not responding then OK, the kubelet's PLEG unhealthy then the node Ready again, an iSCSI connection error then the connection operational after recovery. Nothing is wrong now because of it; frequent ones point at a flaky network or an overloaded server.",
	Evidence: "The kernel's and the kubelet's log lines of the event and of its recovery, in order.",
	Fix:      "Nothing to do for one event; if they repeat, check the network path and the server's load.",
})

// recoveryMark is a line that ends a transient event.
type recoveryMark struct {
	Path string
	Line Line
	// seq orders the marks and the hits of one file.
	N int
}

// Recovery kinds and the signatures they end.
const (
	recoverCeph  = "ceph"
	recoverNFS   = "nfs:"
	recoverPLEG  = "pleg"
	recoverISCSI = "iscsi:"
)

var (
	reNFSOK        = regexp.MustCompile(`nfs: server (\S+) OK`)
	reISCSIRecover = regexp.MustCompile(`(connection\d+:\d+) is operational (?:after recovery|now)`)
)

const maxRecoveryMarks = 1000

// noteRecovery records a line that ends a transient event.
func (x *logIndex) noteRecovery(path string, n int, b []byte) {
	kind := ""
	switch {
	case bytes.Contains(b, []byte("libceph")) && bytes.Contains(b, []byte("session established")):
		kind = recoverCeph
	case bytes.Contains(b, []byte("nfs: server")) && bytes.Contains(b, []byte(" OK")):
		if m := reNFSOK.FindSubmatch(b); m != nil {
			kind = recoverNFS + string(m[1])
		}
	case bytes.Contains(b, []byte("NodeReady")) && !bytes.Contains(b, []byte("NotReady")):
		kind = recoverPLEG
	case bytes.Contains(b, []byte("is operational")):
		if m := reISCSIRecover.FindSubmatch(b); m != nil {
			kind = recoverISCSI + string(m[1])
		}
	default:
		return
	}
	if kind == "" || len(x.recoveries[kind]) >= maxRecoveryMarks {
		return
	}
	x.recoveries[kind] = append(x.recoveries[kind], recoveryMark{Path: path, Line: keepLine(n, b, false), N: n})
}

// lastHit is the latest kept hit of a key.
func (k *keyHits) lastHit() *logHit {
	if k.Last != nil {
		return k.Last
	}
	if len(k.First) == 0 {
		return nil
	}
	last := &k.First[0]
	for i := range k.First {
		h := &k.First[i]
		if h.Path == last.Path && h.Line.N > last.Line.N || h.Meta.Time.After(last.Meta.Time) {
			last = h
		}
	}
	return last
}

// recoveredAfter returns the recovery of kind that follows the key's last
// hit in the same file, or nil.
func (x *logIndex) recoveredAfter(kind string, k *keyHits) *recoveryMark {
	last := k.lastHit()
	if last == nil {
		return nil
	}
	marks := x.recoveries[kind]
	for i := len(marks) - 1; i >= 0; i-- {
		if marks[i].Path == last.Path && marks[i].N > last.Line.N {
			return &marks[i]
		}
	}
	return nil
}

// settleTransients claims the keys of transient signatures that recovered
// and reports them as one info finding; it also drops recoveries that came
// before the event they would end (the NFS rule pairs by server).
func (st *state) settleTransients() {
	type settled struct {
		sig  string
		keys []string
		ev   []Evidence
	}
	var all []settled
	check := func(sig string, kind func(k *keyHits) string) {
		s := st.logs.sigs[sig]
		if s == nil {
			return
		}
		var out settled
		out.sig = sig
		for _, k := range s.unclaimed() {
			if sig == sigNFSNotResponding && st.mountsSeen && k.Key != "" && !st.mountsServer(k.Key) {
				// Nothing of that server is mounted now: the NFS rule
				// files it as history.
				continue
			}
			kd := kind(k)
			r := st.logs.recoveredAfter(kd, k)
			if r == nil {
				continue
			}
			k.claimed = true
			out.keys = append(out.keys, orUnknown(k.Key))
			out.ev = append(out.ev, k.evidence(sigWhat[sig])...)
			out.ev = append(out.ev, Evidence{Path: r.Path, What: "the recovery that followed", Lines: []Line{r.Line}})
		}
		if len(out.keys) > 0 {
			all = append(all, out)
		}
	}
	st.dropPLEGStartup()
	check(sigCephSessionLost, func(*keyHits) string { return recoverCeph })
	check(sigNFSNotResponding, func(k *keyHits) string { return recoverNFS + k.Key })
	check(sigPLEG, func(*keyHits) string { return recoverPLEG })
	// iscsid names a connection "10:0" where the kernel says
	// "connection10:0".
	check(sigISCSIConnError, func(k *keyHits) string {
		if strings.Contains(k.Key, ":") && !strings.HasPrefix(k.Key, "connection") && !strings.Contains(k.Key, ".") {
			return recoverISCSI + "connection" + k.Key
		}
		return recoverISCSI + k.Key
	})
	st.dropStaleNFSOK()
	for _, s := range all {
		sort.Strings(s.keys)
		f := Finding{ID: idRecovered, Severity: Info, Title: "Transient storage event that recovered", Subject: s.sig,
			Summary: fmt.Sprintf("recovered: %s (%s), each followed by its recovery in the log", sigWhat[s.sig], listOf(s.keys, 4)),
			Explanation: "The log shows the event and, after its last occurrence, the line that ends it (session established, server OK, node Ready, connection operational). " +
				"It is not an incident at collection time.",
			Evidence:    s.ev,
			Remediation: []string{"Nothing to do for a one-off; if it repeats, check the network path and the server's load."}}
		st.add(f)
	}
}

// dropStaleNFSOK forgets "nfs: server X OK" lines older than the last
// "not responding" of X still unclaimed: that recovery is over, the server
// stopped answering again after it.
func (st *state) dropStaleNFSOK() {
	bad, ok := st.logs.sigs[sigNFSNotResponding], st.logs.sigs[sigNFSOK]
	if bad == nil || ok == nil {
		return
	}
	for _, k := range bad.unclaimed() {
		r := ok.keys[k.Key]
		if r == nil {
			continue
		}
		rl, kl := r.lastHit(), k.lastHit()
		if rl != nil && kl != nil && rl.Path == kl.Path && rl.Line.N < kl.Line.N {
			delete(ok.keys, k.Key)
			ok.order = slices.DeleteFunc(ok.order, func(o string) bool { return o == k.Key })
		}
	}
}

// plegNever is the age an old kubelet (<= 1.1x) prints for a PLEG that
// has not relisted yet, in the first second of every start: the largest
// time.Duration. Newer kubelets say "pleg has yet to be successful".
const plegNever = "2562047h47m16"

// dropPLEGStartup claims PLEG lines that only say the PLEG has not run
// yet at the kubelet's start: no event at all.
func (st *state) dropPLEGStartup() {
	s := st.logs.sigs[sigPLEG]
	if s == nil {
		return
	}
	for _, k := range s.unclaimed() {
		hs := k.hits()
		startup := len(hs) > 0 && len(hs) == k.Count
		for _, h := range hs {
			startup = startup && strings.Contains(h.Line.Text, plegNever)
		}
		if startup {
			k.claimed = true
			s.Count -= k.Count
		}
	}
}
