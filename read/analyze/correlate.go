package analyze

import (
	"fmt"
	"path"
	"strings"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/signatures"
)

// Correlation: a finding names its subject by tokens (a device node, a
// volume name, a path); log hits that mention one of them are attached to
// it as evidence and claimed, so they are not reported again on their
// own.

// tokenIn reports whether tok occurs in s as a whole word: the characters
// around it are not letters or digits (so /dev/rbd3 does not match
// /dev/rbd30).
func tokenIn(s, tok string) bool {
	if tok == "" {
		return false
	}
	for i := 0; i+len(tok) <= len(s); {
		j := strings.Index(s[i:], tok)
		if j < 0 {
			return false
		}
		j += i
		end := j + len(tok)
		if (j == 0 || !alnum(s[j-1]) || !alnum(tok[0])) && (end == len(s) || !alnum(s[end]) || !alnum(tok[len(tok)-1])) {
			return true
		}
		i = j + 1
	}
	return false
}

func alnum(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// hitMentions reports whether a key's hits mention any token.
func (k *keyHits) mentions(tokens []string) bool {
	for _, t := range tokens {
		if tokenIn(k.Key, t) {
			return true
		}
		for _, h := range k.hits() {
			if tokenIn(h.Line.Text, t) || tokenIn(h.Line.Decoded, t) {
				return true
			}
		}
	}
	return false
}

// claimLogs attaches to f every unclaimed hit of the given signatures
// that mentions a token, and claims them. It returns how many keys were
// attached.
func (st *state) claimLogs(f *Finding, tokens []string, sigs ...string) int {
	tokens = usefulTokens(tokens)
	if len(tokens) == 0 {
		return 0
	}
	return st.claimWhere(f, func(k *keyHits) bool { return k.mentions(tokens) }, sigs...)
}

// claimWhere attaches to f, and claims, every unclaimed key of the given
// signatures for which match holds. It returns how many keys it claimed.
func (st *state) claimWhere(f *Finding, match func(*keyHits) bool, sigs ...string) int {
	n := 0
	for _, id := range sigs {
		s := st.logs.sigs[id]
		if s == nil {
			continue
		}
		for _, k := range s.unclaimed() {
			if !match(k) {
				continue
			}
			k.claimed = true
			n++
			f.addEvidence(k.evidence(sigWhat[id])...)
		}
	}
	return n
}

// addEvidence appends evidence, leaving out lines the finding already
// quotes (one log line can match several signatures).
func (f *Finding) addEvidence(es ...Evidence) {
	type at struct {
		path string
		n    int
	}
	have := map[at]bool{}
	for _, e := range f.Evidence {
		for _, l := range e.Lines {
			have[at{e.Path, l.N}] = true
		}
	}
	for _, e := range es {
		if len(e.Lines) == 0 {
			f.Evidence = append(f.Evidence, e)
			continue
		}
		kept := e.Lines[:0:0]
		for _, l := range e.Lines {
			if !have[at{e.Path, l.N}] {
				kept = append(kept, l)
				have[at{e.Path, l.N}] = true
			}
		}
		if len(kept) > 0 {
			e.Lines = kept
			f.Evidence = append(f.Evidence, e)
		}
	}
}

// usefulTokens drops tokens too short or too common to identify anything.
func usefulTokens(tokens []string) []string {
	var out []string
	for _, t := range tokens {
		t = strings.TrimSpace(t)
		if len(t) < 6 || t == "/var/lib/kubelet" || t == "/var/lib/kubelet/pods" || contains(out, t) {
			continue
		}
		out = append(out, t)
	}
	return out
}

// pathTokens names a mount point by what identifies it in a log line: the
// path itself, the path without a leading host-root prefix (/host,
// /rootfs), and its last element when that is distinctive (a PV or image
// name).
func pathTokens(mp string) []string {
	toks := []string{mp}
	for _, marker := range []string{"/var/lib/", "/kubelet/", "/data/"} {
		if i := strings.Index(mp, marker); i > 0 {
			toks = append(toks, mp[i:])
		}
	}
	if b := path.Base(mp); len(b) >= 12 && b != "mount" && b != "globalmount" && b != "merged" && b != "rootfs" {
		toks = append(toks, b)
	}
	if b := path.Base(mp); b == "mount" || b == "merged" || b == "rootfs" {
		if p := path.Base(path.Dir(mp)); len(p) >= 12 {
			toks = append(toks, p)
		}
	}
	return toks
}

// sigWhat says what each signature's lines show.
var sigWhat = map[string]string{
	sigTeardownBusy:     "the kubelet cannot tear the volume down: removing its directory fails with EBUSY, retried with backoff",
	sigUnmountDevice:    "the kubelet cannot unmount/unmap the device",
	sigPodNotCleaned:    "the pod is terminated but the kubelet waits for its volumes to be cleaned up",
	sigOrphanedPod:      "a deleted pod's volume paths are still on disk",
	sigOrphanedRemove:   "the kubelet cannot remove a deleted pod's volumes directory (a leftover file such as vol_data.json)",
	sigTeardownOK:       "the kubelet reports the volume's TearDown succeeded",
	sigRmdirBusy:        "removing a volume directory fails with EBUSY",
	sigPLEG:             "the kubelet's pod lifecycle event generator is stuck",
	sigSyncLoop:         "the kubelet's sync loop is not running on time",
	sigOperationExists:  "a CSI operation on the volume is already in flight (its lock is held)",
	sigOtherReferences:  "the staging (global) mount is still referenced by other mounts",
	sigUnlinkatBusy:     "removing a container's rootfs fails with EBUSY",
	sigHungTask:         "the kernel's hung-task detector reports a task blocked in the kernel",
	sigCephSessionLost:  "the ceph client lost its monitor session",
	sigNFSNotResponding: "the NFS server does not answer",
	sigNFSOK:            "the NFS server answered again",
	sigTransportNotConn: "the FUSE daemon behind the path is gone",
	sigNotPublished:     "the CSI driver says the volume is not published and does nothing",
	sigNodeUnpublish:    "the CSI driver's unpublish call for the volume",
	sigDeleting:         "log lines about .deleting~ directories",
	sigByteOutput:       "command output printed as a byte array, decoded",
}

// The catalogue's other classes say it in their own words.
func init() {
	for _, c := range signatures.Classes {
		if _, ok := sigWhat[c.ID]; !ok {
			sigWhat[c.ID] = c.Meaning
		}
	}
}

// processEvidence is the processes/tasks.json evidence for some pids.
func (st *state) processEvidence(pids []int, what string) []Evidence {
	if !st.tasksSeen {
		return nil
	}
	var recs []any
	for _, pid := range pids {
		if p := st.procs[pid]; p != nil {
			recs = append(recs, p)
		}
	}
	if len(recs) == 0 {
		return nil
	}
	return []Evidence{{Path: layout.TasksPath, What: what, Record: recs}}
}

// kernelThreadsOn returns the kernel threads named after a device.
func (st *state) kernelThreadsOn(dev string, name string) []layout.KernelThreadRef {
	if h := st.devHolders[dev]; h != nil && len(h.KernelThreads) > 0 {
		return h.KernelThreads
	}
	var out []layout.KernelThreadRef
	for _, kt := range st.kthreads {
		if layout.KernelThreadNamesDevice(kt.Comm, name) || layout.KernelThreadNamesDevice(kt.Comm, dev) {
			out = append(out, kt)
		}
	}
	return out
}

func kthreadNames(ks []layout.KernelThreadRef) []string {
	var out []string
	for _, k := range ks {
		out = append(out, fmt.Sprintf("%s[%d]", k.Comm, k.PID))
	}
	return out
}

// holderNames names the holders of a device or mount.
func holderNames(hs []layout.FileHolder) []string {
	var out []string
	for _, h := range hs {
		s := fmt.Sprintf("%s[%d] (%s)", h.Comm, h.PID, strings.Join(h.Uses, ", "))
		out = append(out, s)
	}
	return out
}

// logsMention reports whether an unclaimed hit of a signature mentions a
// token, claiming nothing.
func (st *state) logsMention(tokens []string, sigs ...string) bool {
	tokens = usefulTokens(tokens)
	for _, id := range sigs {
		if s := st.logs.sigs[id]; s != nil && len(tokens) > 0 {
			for _, k := range s.unclaimed() {
				if k.mentions(tokens) {
					return true
				}
			}
		}
	}
	return false
}
