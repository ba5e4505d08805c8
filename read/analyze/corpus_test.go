package analyze_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/read/analyze"
	"github.com/nodesnap/nodesnap/test/skip"
)

// The evidence corpus: real excerpts of kubelet, kernel, runtime and CSI
// driver logs and goroutine dumps from public issue threads and forums
// (test/corpus/evidence, each with its source in its header), and benign
// lines of real nodes that must raise nothing (test/corpus/benign). Each is
// placed in the healthy fixture bundle where a collection puts it, and
// analysed; the test prints how many named their cause with its object,
// per group, and fails under the thresholds below. The format is in
// test/corpus/README.md.

// Thresholds the corpus must hold: the share of evidence cases whose
// expected finding names its object, and the benign cases allowed to warn.
// They are the targets (95 %, none). The first 154 evidence cases
// reach 96.1 % (148): of the 6 missed, a containerd shim call that was
// canceled rather than timed out, three mount failures whose kubelet
// wording names no volume analyze reads (iSCSI mount and fsck output, a
// configmap's atomic writer), the 1.0-era "Couldn't sync containers"
// wording, and a kubelet dump without minutes (missed by design). Issue 39
// added 44 evidence cases of node plugins' own logs (structured klog,
// logrus, JSON, Rust tracing, Req-ID prefixes), runtimes and recent
// kubelets, and 30 benign ones: with them the corpus reached 79.8 % (158
// of 198, none of 86 benign warned). A follow-up added 14 evidence cases
// (node plugins of OCI, Synology, seaweedfs, csi-driver-iscsi,
// csi-sanlock-lvm and Cinder; kubelets of 1.28 to 1.34 failing teardowns,
// expansions and volume waits) and 7 benign ones: 76.4 % (162 of 212, none
// of 93 benign warned) until the event model reads a node plugin's error
// about a volume whatever its wording. With the event model (read/events,
// every failing storage operation a finding): 91.0 % (193 of 212, none of
// 93 benign warned; the first 154 still 148). A fresh holdout of 64
// cases (40 node plugins' own errors of 33 drivers, 13 kernel, multipathd
// and iscsid lines, 11 healthy runs), measured alone before any change
// (NODESNAP_CORPUS_ONLY): 40 of 53 named, 0 of 11 benign warned; read by
// structure after: 53 of 53, and the corpus 98.5 % (261 of 265, none of
// 104 benign warned). A holdout of structured kubelet lines from
// storage drivers' threads (6 cases): 4 of 5 named before any change, 5
// of 5 after; the corpus 99.0 % (290 of 293, none of 123 benign warned).
// A fresh holdout of 33 kernel, storage daemon and
// runtime cases (2026-12-07): 16 of 25 named and 1 of 8 benign warned
// before; read by structure after (a file system's and a network file
// system client's kernel records, an unmount's ENOENT): 22 of 25, 0 of
// 8, and the corpus 98.1 % (307 of 313, none of 131 benign warned).
// A fresh holdout of 33 kernel, storage daemon and runtime cases
// (2026-12-08, podman among them): 17 of 25 named, 0 of 8 benign warned
// before; read by structure after (a SCSI disk's sense key, a
// parenthesized negative errno, a ZFS pool's warning): 22 of 25, 0 of 8,
// and the corpus 97.8 % (356 of 364, none of 156 benign warned). The
// containerd shim call canceled rather than timed out stays a miss by
// design: a canceled call says the caller left, which a restarted client
// does as well as a hung shim, and without the caller's deadline beside
// it reading it as a timeout would warn on healthy nodes. So does the
// KillContainer of containerd 1.1 and 1.2 that failed with "wait
// container ... stop timeout" under gRPC code Unknown: its timeout is
// in one release's words only, and a kill failing under Unknown is
// most often a container already gone. The bar stays:
// add evidence or reading, not a lower bar.
const (
	corpusMinNamedPercent = 95.0
	corpusMaxBenignWarn   = 0
)

// corpusCase is one fixture file.
type corpusCase struct {
	file   string
	header map[string][]string
	// sections are the excerpt's parts, each placed in one bundle file.
	sections []corpusSection
	benign   bool
	// expectIDs are the finding IDs any of which names the cause;
	// object is what the finding must name (alternatives separated by
	// "|": the pod and the volume of one failure are both its object).
	expectIDs []string
	object    string
}

type corpusSection struct {
	place string
	text  []byte
}

func (c *corpusCase) get(k string) string {
	if v := c.header[k]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// corpusDir finds test/corpus from the package directory, however deep
// the package sits in the module.
func corpusDir(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "test", "corpus")
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("no go.mod above the package directory")
		}
		dir = up
	}
}

var reSection = regexp.MustCompile(`^--- (\S+)$`)

// parseCorpusCase reads one fixture: "key: value" header lines, then
// sections, each opened by "--- <place>" and holding the excerpt verbatim.
func parseCorpusCase(file string, b []byte) (*corpusCase, error) {
	c := &corpusCase{file: file, header: map[string][]string{}}
	var cur *corpusSection
	for _, line := range bytes.SplitAfter(b, []byte("\n")) {
		trimmed := strings.TrimRight(string(line), "\r\n")
		if m := reSection.FindStringSubmatch(trimmed); m != nil {
			c.sections = append(c.sections, corpusSection{place: m[1]})
			cur = &c.sections[len(c.sections)-1]
			continue
		}
		if cur != nil {
			cur.text = append(cur.text, line...)
			continue
		}
		if strings.TrimSpace(trimmed) == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		k, v, ok := strings.Cut(trimmed, ":")
		if !ok {
			return nil, fmt.Errorf("%s: header line without a key: %q", file, trimmed)
		}
		c.header[strings.TrimSpace(k)] = append(c.header[strings.TrimSpace(k)], strings.TrimSpace(v))
	}
	if len(c.sections) == 0 {
		return nil, fmt.Errorf("%s: no excerpt (a line \"--- <place>\" opens one)", file)
	}
	if c.get("source") == "" {
		return nil, fmt.Errorf("%s: no source", file)
	}
	exp := c.get("expect")
	switch {
	case exp == "benign":
		c.benign = true
	case exp == "":
		return nil, fmt.Errorf("%s: no expect", file)
	default:
		id, obj, _ := strings.Cut(exp, " ")
		c.expectIDs = strings.Split(id, "|")
		c.object = strings.TrimSpace(obj)
		if c.object == "" {
			return nil, fmt.Errorf("%s: expect names no object", file)
		}
	}
	return c, nil
}

func loadCorpus(t testing.TB) []*corpusCase {
	t.Helper()
	root := corpusDir(t)
	only := corpusOnly(t)
	var out []*corpusCase
	for _, sub := range []string{"evidence", "benign"} {
		files, err := filepath.Glob(filepath.Join(root, sub, "*.txt"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			c, err := parseCorpusCase(sub+"/"+filepath.Base(f), b)
			if err != nil {
				t.Fatal(err)
			}
			if only != nil && !only[c.file] {
				continue
			}
			if (sub == "benign") != c.benign {
				t.Fatalf("%s: in %s/ but expects %q", c.file, sub, c.get("expect"))
			}
			out = append(out, c)
		}
	}
	return out
}

var (
	reRFC3339Start = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d`)
	// reKubeletIdent is the journal prefix of a kubelet or of a
	// distribution's process that runs one.
	reKubeletIdent = regexp.MustCompile(`\s(kubelet|kubelet-wrapper|k3s|k3s-server|k3s-agent|rke2|kubelite|microk8s\.daemon-kubelite|microk8s\.daemon-kubelet|k0s|k0sworker|hyperkube|atomic-openshift-node|origin-node|kubenswrapper|d8-kubelet-forker)\[(\d+)\]:`)
)

// placeSection returns the bundle path and content of a section placed
// where a collection puts it.
func placeSection(s corpusSection) (string, []byte, error) {
	kind, arg, _ := strings.Cut(s.place, ":")
	switch kind {
	case "journal":
		// journalctl's text of one unit (or of the kernel).
		return "journal/" + arg + ".log", s.text, nil
	case "file":
		// A /var/log file read when journald is absent: messages,
		// syslog, kern.log, kubelet.log.
		return "journal/" + arg, s.text, nil
	case "dmesg":
		return "journal/dmesg.log", s.text, nil
	case "kubelet-goroutine":
		return "kubelet/goroutine-debug2.txt", s.text, nil
	case "kubelet-healthz":
		return "kubelet/healthz.txt", s.text, nil
	case "kubelet-goroutine1":
		return "kubelet/goroutine-debug1.txt", s.text, nil
	case "runtime-goroutine":
		return "runtime/" + arg + "/goroutine-debug2.txt", s.text, nil
	case "csi-hostlog":
		return "csi/hostlogs/" + arg + ".4242.log", s.text, nil
	case "csi-podlog", "csi-podlog-docker":
		// A CSI driver pod's container log: CRI format, or docker's
		// json-file behind dockershim; excerpts pasted from kubectl logs
		// get the prefix the file has on the node.
		var out bytes.Buffer
		sc := bufio.NewScanner(bytes.NewReader(s.text))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for i := 0; sc.Scan(); i++ {
			line := sc.Text()
			stamp := fmt.Sprintf("2026-11-21T09:%02d:%02d.%09dZ", 10+i/60%8, i%60, i)
			if kind == "csi-podlog-docker" {
				j, _ := json.Marshal(map[string]string{"log": line + "\n", "stream": "stderr", "time": stamp})
				out.Write(j)
			} else if reRFC3339Start.MatchString(line) {
				out.WriteString(line)
			} else {
				out.WriteString(stamp + " stderr F " + line)
			}
			out.WriteByte('\n')
		}
		return "csi/podlogs/kube-system_" + arg + "-node-x7k2p/" + arg + "/0.log", out.Bytes(), nil
	}
	return "", nil, fmt.Errorf("unknown place %q", s.place)
}

// corpusBundle is the healthy fixture with the case's excerpt placed in it,
// its running kubelet the one that wrote the excerpt's lines.
func corpusBundle(t *testing.T, c *corpusCase) string {
	t.Helper()
	files := fixture(t, "healthy")
	kubeletPID := 0
	for _, s := range c.sections {
		p, text, err := placeSection(s)
		if err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		if old, ok := files[p]; ok && !strings.HasPrefix(p, "kubelet/goroutine") && !strings.HasPrefix(p, "journal/kubelet") && !strings.HasPrefix(p, "journal/kernel") {
			text = append(append([]byte(nil), old...), text...)
		}
		files[p] = text
		for _, m := range reKubeletIdent.FindAllSubmatch(text, -1) {
			kubeletPID, _ = strconv.Atoi(string(m[2]))
		}
	}
	// What the excerpt says of the node beyond its lines: a mount it
	// names (an NFS export the kernel complains about is mounted), a
	// collector that did not run (logs alone).
	for i, m := range c.header["mount"] {
		f := strings.Fields(m)
		if len(f) != 3 {
			t.Fatalf("%s: mount wants \"source mountpoint fstype\", got %q", c.file, m)
		}
		const ns = "mounts/ns/4026531840.mountinfo"
		files[ns] = append(files[ns], fmt.Sprintf("%d 22 0:%d / %s rw,relatime shared:%d - %s %s rw\n", 900+i, 90+i, f[1], 90+i, f[2], f[0])...)
		var mj map[string]any
		if err := json.Unmarshal(files["mounts/mounts.json"], &mj); err != nil {
			t.Fatal(err)
		}
		for _, n := range mj["namespaces"].([]any) {
			if nsm := n.(map[string]any); nsm["host"] == true {
				nsm["mounts"] = append(nsm["mounts"].([]any), map[string]any{"mount_id": 900 + i, "parent_id": 22, "major": 0, "minor": 90 + i,
					"root": "/", "mount_point": f[1], "options": []string{"rw", "relatime"}, "fs_type": f[2], "source": f[0], "super_options": "rw",
					"propagation_type": "shared", "propagation": map[string]int{"shared": 90 + i}, "class": "network"})
			}
		}
		b, err := json.Marshal(mj)
		if err != nil {
			t.Fatal(err)
		}
		files["mounts/mounts.json"] = b
	}
	for _, w := range c.header["without"] {
		for p := range files {
			if strings.HasPrefix(p, w+"/") {
				delete(files, p)
			}
		}
	}
	// The node's kubelet process: the one that wrote the lines, and what
	// the distribution runs it as.
	var tasks []map[string]any
	if err := json.Unmarshal(files["processes/tasks.json"], &tasks); err != nil {
		t.Fatal(err)
	}
	for _, tk := range tasks {
		if tk["comm"] != "kubelet" {
			continue
		}
		if kubeletPID != 0 {
			tk["pid"] = kubeletPID
			if tk["tid"] == float64(812) {
				tk["tid"] = kubeletPID
			}
		}
		if comm := c.get("comm"); comm != "" {
			tk["comm"] = comm
		}
		if cmd := c.get("process"); cmd != "" && tk["cmdline"] != nil {
			tk["cmdline"] = strings.Fields(cmd)
		}
	}
	b, err := json.Marshal(tasks)
	if err != nil {
		t.Fatal(err)
	}
	files["processes/tasks.json"] = b
	return makeBundle(t, files, bundle.Gzip)
}

// corpusOnly reads the file NODESNAP_CORPUS_ONLY names, if set: the
// cases to measure (one "evidence/x.txt" or "benign/x.txt" a line), so
// a new batch of cases can be measured on its own before any change is
// made for it. The thresholds hold only for the whole corpus.
func corpusOnly(t testing.TB) map[string]bool {
	name := os.Getenv("NODESNAP_CORPUS_ONLY")
	if name == "" {
		return nil
	}
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	only := map[string]bool{}
	for _, l := range strings.Fields(string(b)) {
		only[l] = true
	}
	return only
}

// surfaced says whether any finding names the object, of whatever ID.
func (c *corpusCase) surfaced(rep *analyze.Report) bool {
	for _, f := range rep.Findings {
		text := strings.ToLower(f.Subject + "\n" + f.Title + "\n" + f.Summary)
		for _, obj := range strings.Split(c.object, "|") {
			if strings.Contains(text, strings.ToLower(obj)) {
				return true
			}
		}
	}
	return false
}

// named says whether a finding of the expected IDs names the object.
func (c *corpusCase) named(rep *analyze.Report) bool {
	for _, f := range rep.Findings {
		if !contains(c.expectIDs, f.ID) {
			continue
		}
		text := strings.ToLower(f.Subject + "\n" + f.Title + "\n" + f.Summary)
		for _, obj := range strings.Split(c.object, "|") {
			if strings.Contains(text, strings.ToLower(obj)) {
				return true
			}
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// groups are the tallies a case counts in.
func (c *corpusCase) groups() []string {
	var g []string
	if v := c.get("incident"); v != "" {
		g = append(g, "incident "+v)
	}
	if v := c.get("kubelet"); v != "" {
		if m := regexp.MustCompile(`^v?1\.(\d+)`).FindStringSubmatch(v); m != nil {
			g = append(g, "kubelet 1."+m[1])
		}
	}
	for _, k := range []string{"driver", "runtime", "distribution"} {
		if v := c.get(k); v != "" {
			g = append(g, k+" "+v)
		}
	}
	for _, s := range c.sections {
		kind, _, _ := strings.Cut(s.place, ":")
		switch {
		case s.place == "journal:kernel" || kind == "dmesg" || s.place == "file:kern.log":
			g = append(g, "kernel")
		case strings.Contains(kind, "goroutine"):
			g = append(g, "goroutine dump")
		}
		g = append(g, "place "+s.place)
	}
	return dedupe(g)
}

func dedupe(in []string) []string {
	sort.Strings(in)
	out := in[:0]
	for i, s := range in {
		if i == 0 || s != in[i-1] {
			out = append(out, s)
		}
	}
	return out
}

func TestCorpusEvidence(t *testing.T) {
	skip.Short(t, "the corpus builds one bundle per case")
	cases := loadCorpus(t)
	type tally struct{ n, ok int }
	byGroup := map[string]*tally{}
	var evid, named, surfaced, benign, warned int
	var misses, alarms []string
	for _, c := range cases {
		rep, err := analyze.AnalyzeFile(context.Background(), corpusBundle(t, c), analyze.Options{})
		if err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		if c.benign {
			benign++
			for _, f := range rep.Findings {
				if f.Severity >= analyze.Warning {
					warned++
					alarms = append(alarms, fmt.Sprintf("%s: %s %s: %s", c.file, f.ID, f.Severity, f.Summary))
					break
				}
			}
			continue
		}
		evid++
		ok := c.named(rep)
		if ok || c.surfaced(rep) {
			surfaced++
		}
		if ok {
			named++
		} else {
			var got []string
			for _, f := range rep.Findings {
				got = append(got, fmt.Sprintf("%s(%s) %q", f.ID, f.Severity, f.Subject))
			}
			misses = append(misses, fmt.Sprintf("%s: want %s naming %q; got %s", c.file, strings.Join(c.expectIDs, "|"), c.object, strings.Join(got, ", ")))
		}
		for _, g := range c.groups() {
			if byGroup[g] == nil {
				byGroup[g] = &tally{}
			}
			byGroup[g].n++
			if ok {
				byGroup[g].ok++
			}
		}
	}
	if evid == 0 {
		t.Fatal("no evidence cases in the corpus")
	}
	pct := 100 * float64(named) / float64(evid)
	var b strings.Builder
	fmt.Fprintf(&b, "corpus: %d of %d evidence cases named with their object (%.1f %%), %d surfaced by a finding naming it; %d of %d benign cases warned\n", named, evid, pct, surfaced, warned, benign)
	groups := make([]string, 0, len(byGroup))
	for g := range byGroup {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	for _, g := range groups {
		tl := byGroup[g]
		fmt.Fprintf(&b, "  %-34s %3d/%-3d %5.1f %%\n", g, tl.ok, tl.n, 100*float64(tl.ok)/float64(tl.n))
	}
	t.Log(b.String())
	for _, m := range misses {
		t.Log("miss: " + m)
	}
	for _, a := range alarms {
		t.Log("false alarm: " + a)
	}
	if os.Getenv("NODESNAP_CORPUS_ONLY") != "" {
		return
	}
	if pct < corpusMinNamedPercent {
		t.Errorf("%.1f %% of the evidence cases named, want at least %.1f %%", pct, corpusMinNamedPercent)
	}
	if warned > corpusMaxBenignWarn {
		t.Errorf("%d benign cases warned, want at most %d", warned, corpusMaxBenignWarn)
	}
}
