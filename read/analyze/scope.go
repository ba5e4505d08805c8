package analyze

import (
	"bytes"
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nodesnap/nodesnap/bundle/layout"
)

// Scope: log lines are evidence of the node's state at collection time
// only when the running kubelet instance wrote them (its pid, after its
// start), within the collection window, on this node. Lines of an earlier
// kubelet, older than the window or naming another node are set aside
// before the rules run and reported together as one info finding each,
// never as a current incident. Lines about a device name are evidence for
// that device only when newer than its current instance (attach, mount).

// idEarlierLogs is the finding of the lines set aside.
const idEarlierLogs = "earlier-log-lines"

// What the finding of the lines set aside means, for docs/findings.md.
var _ = document(
	RuleDoc{
		ID: idEarlierLogs, Severity: "info",
		Title:    "Log lines of an earlier kubelet, another time or another node",
		Meaning:  "Signature lines (TearDown failures, orphaned pods, PLEG, NFS and Ceph losses, ...) that are not evidence of the node's state now: written by an earlier kubelet instance (another pid, or before the running kubelet started), while no kubelet ran, before the collection window, about another node, or about an earlier device of the same name. They are set aside before the rules run, so a restarted kubelet or a reused device name does not keep an old incident alive; they are listed here as history.",
		Evidence: "The kubelet's and the kernel's log lines (`journal/`, `logs/`), with the running kubelet's pid and start time (`processes/`, the kubelet's start line) and the window from `manifest.json`.",
		Fix:      "Nothing to do on the node for these lines; if the earlier incident matters, read them with their times (`nodesnap analyze -v`), or collect with a longer `--since`.",
	},
)

// logOrigin is who wrote a group of lines.
type logOrigin struct {
	Ident   string
	PID     int
	KlogPID int
	Host    string
	Node    string
	// Zoned: the times carry a UTC offset (journal, dmesg), rather than
	// a syslog or klog stamp in an unknown zone.
	Zoned bool
}

func (o logOrigin) String() string {
	return o.Ident + "\x00" + strconv.Itoa(o.PID) + "\x00" + strconv.Itoa(o.KlogPID) + "\x00" + o.Host + "\x00" + o.Node
}

func (m logMeta) origin() logOrigin {
	o := logOrigin{Ident: m.Ident, PID: m.PID, Host: m.Host, Node: m.Node, Zoned: m.Zoned}
	if m.PID == 0 {
		// A kubelet logging to a file or a container: its klog pid
		// changes with each instance.
		o.KlogPID = m.KlogPID
	}
	return o
}

// outsideHits are lines set aside, and why.
type outsideHits struct {
	sig  string
	hits *keyHits
	// class is "earlier" (an earlier kubelet or device instance, or
	// before the window) or "other-node".
	class string
	why   string
}

// kubeletProc is the running kubelet as the bundle shows it.
type kubeletProc struct {
	PID   int
	Start time.Time
	// Version is "v1.34.4" and From where it was read; "" when unknown.
	Version string
	From    string
	// Node is the node's name as the kubelet knows it.
	Node string
	// None: the process list was read and no kubelet runs.
	None bool
	// Comm is the process's name; Writers are the pids whose log lines
	// are the running kubelet's: its own and its ancestors' (k0s, a
	// kubelet-wrapper or a shell logs the kubelet's output under its
	// own pid).
	Comm    string
	Writers map[int]bool
}

var (
	reVersionInPath = regexp.MustCompile(`(?:^|[/_-])v?(1\.\d{1,2}\.\d{1,3})(?:[/_.-]|$)`)
	reDeviceAttach  = regexp.MustCompile(`(?:^|[\s\]])([a-z][a-z0-9]*): detected capacity change from 0 to|\(([a-z][a-z0-9]*)\): mounted filesystem|XFS \(([a-z][a-z0-9]*)\): Mounting|rbd: (rbd\d+): capacity`)
	reKubeletVer    = regexp.MustCompile(`kubeletVersion=\\*"(v?\d+\.\d+\.\d+[^"\\]*)`)
)

// maxDevicesNoted bounds the devices whose attach time is kept.
const maxDevicesNoted = 10_000

// noteDevice records when a kernel line says a device was attached or a
// filesystem on it mounted.
func (x *logIndex) noteDevice(b []byte) {
	if !bytes.Contains(b, []byte("capacity change from 0")) && !bytes.Contains(b, []byte("ounted filesystem")) &&
		!bytes.Contains(b, []byte("Mounting V")) && !bytes.Contains(b, []byte("rbd: rbd")) {
		return
	}
	m := reDeviceAttach.FindSubmatch(b)
	if m == nil {
		return
	}
	name := ""
	for _, g := range m[1:] {
		if len(g) > 0 {
			name = string(g)
		}
	}
	t := parseLogMeta(b, x.ref).Time
	if name == "" || t.IsZero() {
		return
	}
	if old, ok := x.devices[name]; (ok && t.After(old)) || (!ok && len(x.devices) < maxDevicesNoted) {
		x.devices[name] = t
	}
}

// noteKubeletVersion keeps the kubelet's start line ("Kubelet version"
// kubeletVersion="v1.34.4"), by the pid that wrote it.
func (x *logIndex) noteKubeletVersion(b []byte) {
	m := reKubeletVer.FindSubmatch(b)
	if m == nil || len(x.versions) >= 64 {
		return
	}
	meta := parseLogMeta(b, x.ref)
	x.versions = append(x.versions, loggedVersion{Version: string(m[1]), PID: meta.PID, Time: meta.Time})
}

// loggedVersion is a kubelet start logged with its version.
type loggedVersion struct {
	Version string
	PID     int
	Time    time.Time
}

// kubelet returns the running kubelet, or nil when the bundle shows none
// (no process list, or no single kubelet process).
func (st *state) kubelet() *kubeletProc {
	if st.kubeletDone {
		return st.kubeletCache
	}
	st.kubeletDone = true
	var found []*procInfo
	for _, p := range st.procs {
		if !p.Kernel && isKubeletProc(p) {
			found = append(found, p)
		}
	}
	if len(found) > 1 {
		// Several (kind, or a kubelet in a container): the host's.
		var host []*procInfo
		for _, p := range found {
			if p.MountNS != 0 && p.MountNS == st.hostNS {
				host = append(host, p)
			}
		}
		found = host
	}
	k := &kubeletProc{None: st.tasksSeen && len(found) == 0}
	if len(found) == 1 {
		k.PID, k.Start, k.Comm = found[0].PID, found[0].Start, found[0].Comm
		k.Node = flagValue(found[0].Cmdline, "--hostname-override")
		k.Writers = map[int]bool{k.PID: true}
		for p, i := st.procs[found[0].PPID], 0; p != nil && p.PID > 1 && i < 16 && !k.Writers[p.PID]; p, i = st.procs[p.PPID], i+1 {
			k.Writers[p.PID] = true
		}
	}
	if k.Node == "" {
		k.Node = st.podsNode
	}
	switch {
	case st.buildVersion != "":
		k.Version, k.From = st.buildVersion, "kubernetes_build_info in "+st.buildVersionFile
	case k.PID != 0:
		for _, v := range st.logs.versions {
			if v.PID == k.PID {
				k.Version, k.From = v.Version, "the running kubelet's start line in its log"
			}
		}
	}
	if k.Version == "" && len(found) == 1 {
		bin, _, _ := strings.Cut(found[0].Cmdline, " ")
		if m := reVersionInPath.FindStringSubmatch(bin); m != nil {
			k.Version, k.From = "v"+m[1], "the running kubelet's binary path ("+bin+")"
		}
	}
	if k.PID == 0 && k.Version == "" && k.Node == "" && !k.None {
		k = nil
	}
	st.kubeletCache = k
	return k
}

// isKubeletProc tells the process that runs the node's kubelet, by what
// it is rather than its name alone: the kubelet binary; hyperkube run as
// "hyperkube kubelet"; the kubelet inside k3s ("k3s server|agent", also
// the process titles k3s-server/k3s-agent); MicroK8s' kubelite; the
// all-in-one "openshift start [node]" of OpenShift 3; a wrapper whose
// first argument is the kubelet's binary; a process given the
// kubelet's own flags (--kubeconfig with --root-dir or --container-runtime-
// endpoint and a kubelet config), whatever its binary is named.
func isKubeletProc(p *procInfo) bool {
	if p.UID != 0 {
		// The node's kubelet runs as root (as collection requires
		// before it trusts one): a user's process of that name is not it.
		return false
	}
	switch p.Comm {
	case "kubelet", "kubelite", "k3s-server", "k3s-agent":
		return true
	}
	f := strings.Fields(p.Cmdline)
	if len(f) == 0 {
		return false
	}
	bin := path.Base(f[0])
	arg := func(i int) string {
		if i < len(f) {
			return f[i]
		}
		return ""
	}
	switch bin {
	case "kubelet", "kubelite":
		return true
	case "hyperkube":
		return arg(1) == "kubelet" || arg(1) == "kubelite"
	case "k3s", "k3s-server", "k3s-agent":
		return arg(1) == "server" || arg(1) == "agent" || bin != "k3s"
	case "openshift":
		return arg(1) == "start" && (arg(2) == "" || arg(2) == "node" || strings.HasPrefix(arg(2), "--"))
	}
	if strings.HasPrefix(p.Cmdline, "k3s server") || strings.HasPrefix(p.Cmdline, "k3s agent") {
		return true
	}
	if b := path.Base(arg(1)); strings.HasPrefix(arg(1), "/") && strings.Contains(arg(1), "bin/") && (b == "kubelet" || b == "kubelite") {
		// A wrapper given the kubelet's binary by its path in a bin
		// directory to run (not /var/lib/kubelet, a directory) (Deckhouse's
		// d8-kubelet-forker /usr/bin/kubelet, OpenShift's kubenswrapper,
		// a shell's exec): its lines are the kubelet's.
		return true
	}
	kubeconfig, kubeletOnly := false, false
	for _, a := range f[1:] {
		switch {
		case strings.HasPrefix(a, "--kubeconfig"):
			kubeconfig = true
		case strings.HasPrefix(a, "--root-dir"), strings.HasPrefix(a, "--container-runtime-endpoint"), strings.HasPrefix(a, "--pod-manifest-path"), strings.HasPrefix(a, "--bootstrap-kubeconfig"):
			kubeletOnly = true
		}
	}
	return kubeconfig && kubeletOnly
}

// kubeletIdents are the journal identifiers a kubelet's lines come with:
// its own, a wrapper's (CoreOS kubelet-wrapper, OpenShift's kubenswrapper,
// Deckhouse's d8-kubelet-forker, a shell), a distribution's
// process or unit (k3s, rke2, MicroK8s, hyperkube, OpenShift's node).
var kubeletIdents = map[string]bool{"kubelet": true, "kubelet-wrapper": true, "hyperkube": true, "k3s": true, "k3s-server": true, "k3s-agent": true,
	"kubelite": true, "microk8s.daemon-kubelite": true, "microk8s.daemon-kubelet": true, "origin-node": true, "atomic-openshift-node": true, "openshift": true,
	"k0s": true, "k0sworker": true, "rke2": true, "kubenswrapper": true, "d8-kubelet-forker": true}

// flagValue is the value of --name=value or --name value in a command line.
func flagValue(cmdline, name string) string {
	f := strings.Fields(cmdline)
	for i, a := range f {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
		if a == name && i+1 < len(f) {
			return f[i+1]
		}
	}
	return ""
}

// minorVersion is the minor of a "v1.34.4" version, and false when unknown.
func minorVersion(v string) (int, bool) {
	v = strings.TrimPrefix(v, "v")
	maj, rest, ok := strings.Cut(v, ".")
	if !ok || maj != "1" {
		return 0, false
	}
	mi, _, _ := strings.Cut(rest, ".")
	n, err := strconv.Atoi(mi)
	return n, err == nil
}

// kubeletAtLeast says whether the running kubelet is at least 1.minor,
// and whether its version is known at all.
func (st *state) kubeletAtLeast(minor int) (atLeast, known bool) {
	k := st.kubelet()
	if k == nil || k.Version == "" {
		return false, false
	}
	m, ok := minorVersion(k.Version)
	if !ok {
		return false, false
	}
	return m >= minor, true
}

// sameNode compares node or host names, case-insensitively and by their
// first label when one is a short name (ip-10-0-0-1 and
// ip-10-0-0-1.ec2.internal are one node).
func sameNode(a, b string) bool {
	a, b = strings.ToLower(a), strings.ToLower(b)
	if a == b {
		return true
	}
	sa, _, _ := strings.Cut(a, ".")
	sb, _, _ := strings.Cut(b, ".")
	return (sa == a || sb == b) && sa == sb
}

// scopeLogs sets aside the log lines that are not evidence of this node's
// state now, and merges what is left by key.
func (st *state) scopeLogs() {
	k := st.kubelet()
	host := ""
	if st.manifest != nil {
		host = st.manifest.Host.Hostname
	}
	// A node named in a line is compared only with the name the kubelet
	// itself uses (a node may be named after its IP, not its host name).
	var names []string
	if k != nil && k.Node != "" {
		names = append(names, k.Node)
		if host != "" {
			names = append(names, host)
		}
	}
	var winStart time.Time
	if m := st.manifest; m != nil && m.Settings.SinceSeconds > 0 && !m.StartedAt.IsZero() {
		winStart = m.StartedAt.Add(-time.Duration(m.Settings.SinceSeconds * float64(time.Second)))
	}
	for _, id := range slices.Sorted(maps.Keys(st.logs.sigs)) {
		s := st.logs.sigs[id]
		keys := map[string]*keyHits{}
		var order []string
		for _, ik := range s.order {
			kh := s.keys[ik]
			if class, why := outOfScope(kh, k, names, winStart); why != "" {
				s.Count -= kh.Count
				if !evidenceOnlySigs[id] {
					st.logs.outside = append(st.logs.outside, outsideHits{sig: id, hits: kh, class: class, why: why})
				}
				continue
			}
			if m := keys[kh.Key]; m != nil {
				m.merge(kh)
				continue
			}
			keys[kh.Key] = kh
			order = append(order, kh.Key)
		}
		s.keys, s.order = keys, order
	}
	st.scope = logScope{kubelet: k, names: names, winStart: winStart}
}

// logScope is what log lines are compared with to tell evidence of now:
// the running kubelet, the node's names, the collection window's start.
type logScope struct {
	kubelet  *kubeletProc
	names    []string
	winStart time.Time
}

// outOfScope says why a group of lines is not evidence of now, or "".
func outOfScope(kh *keyHits, k *kubeletProc, names []string, winStart time.Time) (class, why string) {
	o := kh.origin
	slack := 5 * time.Second
	if !o.Zoned {
		// A syslog or klog stamp is in the node's zone, unknown here.
		slack = 15 * time.Hour
	}
	before := func(t time.Time) bool { return !kh.Newest.IsZero() && !t.IsZero() && kh.Newest.Before(t.Add(-slack)) }
	// The journal's host field is not compared: a host renamed after boot
	// (cloud-init) or an early-boot "localhost" is still this machine.
	if o.Node != "" && len(names) > 0 && !anySameNode(o.Node, names) {
		return "other-node", "about node " + o.Node + ", not this node (" + strings.Join(names, ", ") + ")"
	}
	path := ""
	if len(kh.First) > 0 {
		path = kh.First[0].Path
	}
	if k != nil && (k.PID != 0 || k.None) && (kubeletIdents[o.Ident] || (o.Ident == "" && strings.Contains(path, "kubelet"))) {
		switch {
		case k.None:
			return "earlier", "written by a kubelet that no longer runs: the process list has none at collection time"
		case o.PID != 0 && !k.Writers[o.PID] && !wrapperIdent(o.Ident, k):
			return "earlier", fmt.Sprintf("written by an earlier kubelet (pid %d), not the running one (pid %d)", o.PID, k.PID)
		case before(k.Start):
			return "earlier", "written before the running kubelet (pid " + strconv.Itoa(k.PID) + ") started at " + k.Start.UTC().Format(time.RFC3339)
		}
	}
	if before(winStart) {
		return "earlier", "older than the collection window (from " + winStart.UTC().Format(time.RFC3339) + ")"
	}
	return "", ""
}

// wrapperIdent tells lines logged under the name of a process that runs
// the kubelet inside it or wraps it (k0s, kubelet-wrapper, kubelite,
// k3s, OpenShift's node) when the running kubelet has another name: their
// pid is the wrapper's, which the process list may not show, so only
// their time tells an earlier instance.
func wrapperIdent(ident string, k *kubeletProc) bool {
	return ident != "" && ident != "kubelet" && k.Comm != "" && ident != k.Comm
}

func anySameNode(n string, names []string) bool {
	for _, m := range names {
		if sameNode(n, m) {
			return true
		}
	}
	return false
}

// merge adds another origin's hits of the same key.
func (k *keyHits) merge(o *keyHits) {
	k.Count += o.Count
	rest := o.hits()
	for len(k.First) < maxKeyHits && len(rest) > 0 {
		k.First = append(k.First, rest[0])
		rest = rest[1:]
	}
	for i := range rest {
		if k.Last == nil || rest[i].Meta.Time.After(k.Last.Meta.Time) {
			h := rest[i]
			k.Last = &h
		}
	}
	if !o.Oldest.IsZero() && (k.Oldest.IsZero() || o.Oldest.Before(k.Oldest)) {
		k.Oldest = o.Oldest
	}
	if o.Newest.After(k.Newest) {
		k.Newest = o.Newest
	}
	for _, d := range o.Decoded {
		if len(k.Decoded) < maxDecoded && !contains(k.Decoded, d) {
			k.Decoded = append(k.Decoded, d)
		}
	}
	k.Objects = mergeObjects(k.Objects, o.Objects)
}

// deviceSince is when a device's current instance began, as far as the
// bundle tells: the newest kernel line attaching it or mounting a
// filesystem on it, or the start of a kernel thread named after it
// (jbd2/loop0-8 starts with the mount). Zero when unknown.
func (st *state) deviceSince(name string) time.Time {
	if name == "" {
		return time.Time{}
	}
	t := st.logs.devices[name]
	for _, kt := range st.kthreads {
		if layout.KernelThreadNamesDevice(kt.Comm, name) {
			if p := st.procs[kt.PID]; p != nil && p.Start.After(t) {
				t = p.Start
			}
		}
	}
	return t
}

// setAsideStale moves the unclaimed hits of sigs that mention a device
// name but are older than the device's current instance (since) out of
// the evidence: a reused name (loop0 is detached and attached again) is
// not the same device.
func (st *state) setAsideStale(name string, since time.Time, tokens []string, sigs ...string) {
	tokens = usefulTokens(tokens)
	if since.IsZero() || len(tokens) == 0 {
		return
	}
	for _, id := range sigs {
		s := st.logs.sigs[id]
		if s == nil {
			continue
		}
		for _, kh := range s.unclaimed() {
			if kh.Newest.IsZero() || !kh.Newest.Before(since.Add(-time.Second)) || !kh.mentions(tokens) {
				continue
			}
			kh.claimed = true
			st.logs.outside = append(st.logs.outside, outsideHits{sig: id, hits: kh, class: "earlier",
				why: "about an earlier device named " + name + ": the current one was attached or mounted at " + since.UTC().Format(time.RFC3339)})
		}
	}
}

// ruleEarlierLogs reports the lines set aside, one finding per class.
func ruleEarlierLogs(st *state) {
	byClass := map[string][]outsideHits{}
	for _, o := range st.logs.outside {
		byClass[o.class] = append(byClass[o.class], o)
	}
	for _, class := range slices.Sorted(maps.Keys(byClass)) {
		os := byClass[class]
		sort.SliceStable(os, func(i, j int) bool { return os[i].sig < os[j].sig })
		lines := 0
		var sigs, whys []string
		f := Finding{ID: idEarlierLogs, Severity: Info, Subject: class}
		for _, o := range os {
			lines += o.hits.Count
			if !contains(sigs, o.sig) {
				sigs = append(sigs, o.sig)
			}
			if !contains(whys, o.why) {
				whys = append(whys, o.why)
			}
			if len(f.Evidence) < 12 {
				f.Evidence = append(f.Evidence, o.hits.evidence(o.why+": "+sigWhat[o.sig])...)
			}
		}
		switch class {
		case "other-node":
			f.Title = "Log lines about another node, not evidence for this one"
			f.Summary = fmt.Sprintf("%s of %s name another node: %s", plural(lines, "log line", "log lines"), listOf(sigs, 4), listOf(whys, 2))
			f.Explanation = "These lines match the signature of a storage incident, but another node wrote them or they are about another node (a CSI controller's log, a copied journal). They say nothing about this node and no finding above uses them."
		default:
			f.Title = "Earlier log lines, not the state at collection time"
			f.Summary = fmt.Sprintf("earlier: %s of %s: %s", plural(lines, "log line", "log lines"), listOf(sigs, 4), listOf(whys, 2))
			f.Explanation = "These lines match the signature of a storage incident, but they come from before what runs now: an earlier kubelet instance (a restart ends its incidents, or shows them again under the new pid), " +
				"a time before the collection window, or a device name used before by another device. No finding above treats them as current; read them as history."
		}
		st.add(f)
	}
}
