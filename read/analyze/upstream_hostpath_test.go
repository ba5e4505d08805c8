package analyze_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/read/analyze"
)

// testdata/upstream-hostpath/hostpathplugin.log is the standard error of
// the upstream csi-driver-host-path v1.18.0 (github.com/kubernetes-csi/
// csi-driver-host-path at commit cc78ee78ae23908c9e0607df2fe09c7ecfa52597,
// run with -v=5 as its deployments run it), verbatim but for the state
// directory and socket paths, driven through CreateVolume,
// NodeGetCapabilities, NodeStageVolume, NodePublishVolume,
// NodeGetVolumeStats, NodeUnpublishVolume and NodeUnstageVolume of one
// volume, then a NodeStageVolume of a volume it does not know. Each call
// is logged four ways: "GRPC call", its request, its response (or "GRPC
// error") and a JSON "gRPCCall" record with an "Error" field.
func upstreamHostpathLog(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("testdata/upstream-hostpath/hostpathplugin.log")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

var klogTime = regexp.MustCompile(`^[IWEF](\d\d)(\d\d) (\d\d:\d\d:\d\d\.\d{6})`)

// criLog writes lines as the kubelet keeps a container's output, each
// stamped with the time of the klog line it belongs to.
func criLog(lines []string) []byte {
	var b strings.Builder
	stamp := "2026-12-07T16:01:13.000000000Z"
	for _, l := range lines {
		if m := klogTime.FindStringSubmatch(l); m != nil {
			stamp = "2026-" + m[1] + "-" + m[2] + "T" + m[3] + "000Z"
		}
		b.WriteString(stamp + " stderr F " + l + "\n")
	}
	return []byte(b.String())
}

// The upstream driver serving a volume to a pod is a healthy node: its
// successful calls' records (whose requests name the staging and target
// paths, beside an empty "Error") raise nothing. The failed call that
// follows still does, naming its volume.
func TestUpstreamHostpathDriverLog(t *testing.T) {
	lines := upstreamHostpathLog(t)
	cut := -1
	for i, l := range lines {
		if strings.Contains(l, "GRPC call: /csi.v1.Node/NodeStageVolume") {
			cut = i // the last one: the failing call
		}
	}
	if cut < 0 || !strings.Contains(strings.Join(lines[cut:], "\n"), "no-such-volume does not exist") {
		t.Fatalf("the fixture does not end with the failing NodeStageVolume")
	}
	const logPath = "csi/podlogs/e2e_node-storage-plugin-x7k2q/plugin/0.log"

	files := fixture(t, "healthy")
	files[logPath] = criLog(lines[:cut])
	rep := analyzeFiles(t, files)
	for _, f := range rep.Findings {
		if f.Severity >= analyze.Warning || f.ID == idCSINodeOpFailed {
			t.Errorf("the healthy upstream driver gets %s %s (%s): %s", f.Severity, f.ID, f.Subject, f.Summary)
		}
	}

	files = fixture(t, "healthy")
	files[logPath] = criLog(lines)
	rep = analyzeFiles(t, files)
	var got []string
	for _, f := range rep.Findings {
		if f.ID == idCSINodeOpFailed && strings.Contains(f.Subject+f.Summary, "no-such-volume") {
			return
		}
		got = append(got, f.ID+" ("+f.Subject+")")
	}
	t.Errorf("the failed NodeStageVolume of no-such-volume gives no %s finding; got %q", idCSINodeOpFailed, got)
}

const idCSINodeOpFailed = "csi-node-operation-failed"
