package analyze_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/nodesnap/nodesnap/read/analyze"
	"github.com/nodesnap/nodesnap/signatures/driverwords"
	"github.com/nodesnap/nodesnap/test/skip"
)

// Generated lines from each CSI driver's own error paths: every gRPC status
// error of signatures/driverwords whose format carries an object (a volume
// ID, a target or staging path, a device) is rendered with realistic
// objects the way that driver logs it, placed in the driver's node plugin
// container log of the healthy fixture bundle, and analysed. Every line
// must yield a finding naming its object: a node plugin's error about a
// volume is a finding whatever its wording.
//
// TestDriverErrorLinesRender always runs and checks the rendering (the
// table feeds every driver, every line carries its object and gRPC code).
// TestDriverErrorLinesNamed runs only with NODESNAP_DRIVER_LINES set to the
// share (in percent) of lines that must be named: it prints the share per
// driver and the lines missed, and fails under the share asked for.
//
//	NODESNAP_DRIVER_LINES=100 go test ./read/analyze -run TestDriverErrorLinesNamed -v

// driverSample are the objects a driver's lines are rendered with, in the
// shape that driver's volume handles, paths and devices have.
type driverSample struct {
	container string
	volumeID  string
	device    string
	// render writes one logged line of a gRPC error from its code and
	// message, as the driver's node plugin logs it.
	render func(code, msg string) string
}

const (
	samplePodUID  = "3b6f1c2e-8d4a-4f7b-9e21-5c0a7d9e4b16"
	samplePVName  = "pvc-8e1d2c3b-4a5f-4e6d-9c7b-0a1f2e3d4c5b"
	sampleStaging = "/var/lib/kubelet/plugins/kubernetes.io/csi/%s/0f6e2b1a9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f/globalmount"
)

func sampleTarget() string {
	return "/var/lib/kubelet/pods/" + samplePodUID + "/volumes/kubernetes.io~csi/" + samplePVName + "/mount"
}

// klogGRPC is the interceptor line of the drivers built on csi-lib-utils
// and csi-common: "GRPC error: rpc error: code = X desc = ...".
func klogGRPC(code, msg string) string {
	return "E1121 09:10:11.123456       1 utils.go:81] GRPC error: rpc error: code = " + code + " desc = " + msg
}

var driverSamples = map[string]driverSample{
	"aws-ebs": {container: "ebs-plugin", volumeID: "vol-0a1b2c3d4e5f60718", device: "/dev/nvme2n1",
		render: func(code, msg string) string {
			return `E1121 09:10:11.123456       1 driver.go:133] "GRPC error" err=` + strconv.Quote("rpc error: code = "+code+" desc = "+msg)
		}},
	"aws-efs": {container: "efs-plugin", volumeID: "fs-0a1b2c3d4e5f60718::fsap-0f1e2d3c4b5a69788", device: "fs-0a1b2c3d4e5f60718.efs.eu-west-1.amazonaws.com:/",
		render: klogGRPC},
	"gcp-pd": {container: "gce-pd-driver", volumeID: "projects/my-project/zones/europe-west1-b/disks/" + samplePVName, device: "/dev/disk/by-id/google-" + samplePVName,
		render: klogGRPC},
	"azuredisk": {container: "azuredisk", volumeID: "/subscriptions/9b4e6c2a-1d3f-4e5a-8b7c-0d1e2f3a4b5c/resourceGroups/mc_rg_aks_westeurope/providers/Microsoft.Compute/disks/" + samplePVName, device: "/dev/disk/azure/scsi1/lun3",
		render: klogGRPC},
	"azurefile": {container: "azurefile", volumeID: "mc_rg_aks_westeurope#f1a2b3c4d5e6f7a8b9c0d1e#" + samplePVName + "###default", device: "//f1a2b3c4d5e6f7a8b9c0d1e.file.core.windows.net/" + samplePVName,
		render: klogGRPC},
	"ceph-csi": {container: "csi-rbdplugin", volumeID: "0001-0009-rook-ceph-0000000000000002-5d0b3a3c-7f1e-4c2d-9a8b-6e5f4d3c2b1a", device: "/dev/rbd3",
		render: func(code, msg string) string {
			return "E1121 09:10:11.123456    4242 utils.go:271] ID: 42 Req-ID: 0001-0009-rook-ceph-0000000000000002-5d0b3a3c-7f1e-4c2d-9a8b-6e5f4d3c2b1a GRPC error: rpc error: code = " + code + " desc = " + msg
		}},
	"csi-driver-nfs": {container: "nfs", volumeID: "nfs-server.example.com#srv/nfs/share#" + samplePVName + "##", device: "nfs-server.example.com:/srv/nfs/share/" + samplePVName,
		render: klogGRPC},
	"csi-driver-smb": {container: "smb", volumeID: "smb-server.example.com/share#" + samplePVName + "##", device: "//smb-server.example.com/share/" + samplePVName,
		render: klogGRPC},
	"hostpath": {container: "hostpath", volumeID: "7c1d9e2a-4b6f-11ef-9a3c-0242ac120002", device: "/dev/loop7",
		render: func(code, msg string) string {
			return "E1121 09:10:11.123456       1 server.go:124] GRPC error: rpc error: code = " + code + " desc = " + msg
		}},
	"longhorn": {container: "longhorn-csi-plugin", volumeID: samplePVName, device: "/dev/longhorn/" + samplePVName,
		render: func(code, msg string) string {
			return `time="2026-11-21T09:10:11Z" level=error msg=` + strconv.Quote("GRPC error: rpc error: code = "+code+" desc = "+msg)
		}},
	"topolvm": {container: "topolvm-node", volumeID: "2f0a7c6e-1b9d-4e3f-8a5c-7d6e5f4a3b2c", device: "/dev/topolvm/2f0a7c6e-1b9d-4e3f-8a5c-7d6e5f4a3b2c",
		render: func(code, msg string) string {
			return `{"level":"error","ts":"2026-11-21T09:10:11Z","logger":"driver.node","msg":"GRPC error","error":` + strconv.Quote("rpc error: code = "+code+" desc = "+msg) + `}`
		}},
	"vsphere": {container: "vsphere-csi-node", volumeID: "4e3d2c1b-0a9f-4e8d-b7c6-5a4f3e2d1c0b", device: "/dev/sdc",
		render: func(code, msg string) string {
			return "2026-11-21T09:10:11.123Z\tERROR\tservice/node.go:210\t" + msg + "\t{\"TraceId\": \"c5d4e3f2-a1b0-4c9d-8e7f-6a5b4c3d2e1f\"}"
		}},
}

// argKind says what a format argument is, from its source expression.
func argKind(expr string) string {
	e := strings.ToLower(expr)
	switch {
	case strings.HasPrefix(e, "err") || strings.HasSuffix(e, "err") || strings.Contains(e, "error") || strings.HasSuffix(e, ".err()"):
		return "error"
	case strings.Contains(e, "staging"):
		return "staging"
	case strings.Contains(e, "volumeid") || strings.Contains(e, "volid") || e == "id" || e == "volume.id":
		return "volume"
	case strings.Contains(e, "dev") || strings.Contains(e, "source") || strings.Contains(e, "disk"):
		return "device"
	case strings.Contains(e, "target") || strings.Contains(e, "path") || strings.Contains(e, "mount") || strings.Contains(e, "dir"):
		return "target"
	case strings.Contains(e, "fstype") || strings.Contains(e, "fs"):
		return "fstype"
	case strings.Contains(e, "node"):
		return "node"
	case strings.Contains(e, "volume") || strings.Contains(e, "vol"):
		return "volume"
	}
	return "other"
}

// renderedLine is one generated line and the object it must be named by.
type renderedLine struct {
	w      driverwords.Word
	line   string
	object string
}

// renderWord renders a status error's format with the driver's sample
// objects; ok is false when the format carries no object.
func renderWord(w driverwords.Word, s driverSample) (renderedLine, bool) {
	values := make([]string, len(w.Args))
	object := ""
	for i, a := range w.Args {
		switch argKind(a) {
		case "volume":
			values[i] = s.volumeID
		case "staging":
			values[i] = fmt.Sprintf(sampleStaging, w.Driver)
		case "target":
			values[i] = sampleTarget()
		case "device":
			values[i] = s.device
		case "error":
			values[i] = "exit status 32"
			continue
		case "fstype":
			values[i] = "ext4"
			continue
		case "node":
			values[i] = "worker-3"
			continue
		default:
			values[i] = "3"
			continue
		}
		if object == "" {
			object = values[i]
		}
	}
	if object == "" {
		return renderedLine{}, false
	}
	msg := formatVerbs(w.Format, values)
	if !strings.Contains(msg, object) {
		return renderedLine{}, false
	}
	return renderedLine{w: w, line: s.render(w.Code, msg), object: object}, true
}

// formatVerbs substitutes printf verbs with the values in order, as
// fmt would print strings: %q quotes, the others print the value.
func formatVerbs(format string, values []string) string {
	var b strings.Builder
	n := 0
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' || i+1 == len(format) {
			b.WriteByte(c)
			continue
		}
		j := i + 1
		for j < len(format) && strings.IndexByte("+-# 0123456789.", format[j]) >= 0 {
			j++
		}
		if j == len(format) {
			b.WriteString(format[i:])
			break
		}
		verb := format[j]
		i = j
		if verb == '%' {
			b.WriteByte('%')
			continue
		}
		v := "%!" + string(verb) + "(MISSING)"
		if n < len(values) {
			v = values[n]
			n++
		}
		switch verb {
		case 'q':
			v = strconv.Quote(v)
		case 'd':
			if strings.IndexFunc(v, func(r rune) bool { return !unicode.IsDigit(r) }) >= 0 {
				v = "3"
			}
		}
		b.WriteString(v)
	}
	return b.String()
}

// driverLines renders the table's lines, one per driver and format.
func driverLines(t *testing.T) []renderedLine {
	t.Helper()
	tab, err := driverwords.Load()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var out []renderedLine
	for _, w := range tab.Words {
		if w.Kind != "status" || w.Code == "" {
			continue
		}
		s, ok := driverSamples[w.Driver]
		if !ok {
			t.Errorf("driver %s of the wording table has no sample objects here: add it to driverSamples", w.Driver)
			continue
		}
		key := w.Driver + "\x00" + w.Format
		if seen[key] {
			continue
		}
		seen[key] = true
		if l, ok := renderWord(w, s); ok {
			out = append(out, l)
		}
	}
	return out
}

func TestDriverErrorLinesRender(t *testing.T) {
	lines := driverLines(t)
	perDriver := map[string]int{}
	for _, l := range lines {
		perDriver[l.w.Driver]++
		if !strings.Contains(l.line, l.object) || !strings.Contains(l.line, l.w.Code) && l.w.Driver != "vsphere" {
			t.Errorf("%s %s: line %q lacks its object %q or code %s", l.w.Driver, l.w.Func, l.line, l.object, l.w.Code)
		}
		if strings.Contains(l.line, "(MISSING)") {
			t.Errorf("%s %q: more verbs than arguments: %q", l.w.Driver, l.w.Format, l.line)
		}
	}
	for d := range driverSamples {
		if perDriver[d] == 0 {
			t.Errorf("no line rendered for %s: the wording table lost it or its arguments carry no object", d)
		}
	}
	if len(lines) < 100 {
		t.Errorf("%d lines rendered, want the table's status errors with objects (more than 100)", len(lines))
	}
}

func TestDriverErrorLinesNamed(t *testing.T) {
	skip.Short(t, "one bundle per generated line")
	want := skip.OptIn(t, "NODESNAP_DRIVER_LINES", "the share of generated driver lines named with their object (a measure until the event model lands)")
	minPct, err := strconv.ParseFloat(want, 64)
	if err != nil {
		t.Fatalf("NODESNAP_DRIVER_LINES=%q: want the share in percent that must be named: %v", want, err)
	}
	lines := driverLines(t)
	type tally struct{ n, ok int }
	byDriver := map[string]*tally{}
	var named int
	var misses []string
	for _, l := range lines {
		c := &corpusCase{file: "generated/" + l.w.Driver, header: map[string][]string{},
			sections: []corpusSection{{place: "csi-podlog:" + driverSamples[l.w.Driver].container, text: []byte(l.line + "\n")}}}
		rep, err := analyze.AnalyzeFile(context.Background(), corpusBundle(t, c), analyze.Options{})
		if err != nil {
			t.Fatalf("%s: %v", l.line, err)
		}
		if byDriver[l.w.Driver] == nil {
			byDriver[l.w.Driver] = &tally{}
		}
		byDriver[l.w.Driver].n++
		if namesObject(rep, l.object) {
			named++
			byDriver[l.w.Driver].ok++
			continue
		}
		misses = append(misses, fmt.Sprintf("%s %s (%s): %s", l.w.Driver, strings.Join(l.w.Ops, ","), l.w.Func, l.line))
	}
	pct := 100 * float64(named) / float64(len(lines))
	var b strings.Builder
	fmt.Fprintf(&b, "generated driver lines: %d of %d named with their object (%.1f %%)\n", named, len(lines), pct)
	drivers := make([]string, 0, len(byDriver))
	for d := range byDriver {
		drivers = append(drivers, d)
	}
	sort.Strings(drivers)
	for _, d := range drivers {
		fmt.Fprintf(&b, "  %-16s %3d/%-3d %5.1f %%\n", d, byDriver[d].ok, byDriver[d].n, 100*float64(byDriver[d].ok)/float64(byDriver[d].n))
	}
	t.Log(b.String())
	if os.Getenv("NODESNAP_DRIVER_LINES_MISSES") != "" {
		for _, m := range misses {
			t.Log("miss: " + m)
		}
	}
	if pct < minPct {
		t.Errorf("%.1f %% of the generated driver lines named with their object, want at least %.1f %% (NODESNAP_DRIVER_LINES_MISSES=1 lists them)", pct, minPct)
	}
}

// namesObject says whether any finding names the object in its subject,
// title or summary.
func namesObject(rep *analyze.Report, object string) bool {
	o := strings.ToLower(object)
	for _, f := range rep.Findings {
		if strings.Contains(strings.ToLower(f.Subject+"\n"+f.Title+"\n"+f.Summary), o) {
			return true
		}
	}
	return false
}
