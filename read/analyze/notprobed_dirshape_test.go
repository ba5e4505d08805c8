package analyze_test

import (
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/read/analyze"
)

// A pod volume on a hung ceph-fuse mount that mountprobe did not reach
// before its deadline, and that nothing but dirshape ties to a hang: no
// task list, no holder. The fixture is real output of a run with --root
// (renamed /host) against a FUSE mount whose server stopped answering:
// mountprobe/probes.json from a run whose collector deadline (1.4 s) came
// before the probe deadline (5 s), dirshape/shape.json from a run of
// dirshape alone whose 2 s stat probe of the volume did not answer. The
// volume's probe record is kept, the other 366 unfinished mounts of that
// machine are left out. dirshape's timeout on the same path makes the
// unprobed mount a critical finding; without it the mount is only listed
// as not probed.
func TestNotProbedTiedByDirshapeAlone(t *testing.T) {
	const (
		uid = "5d4c3b2a-1f0e-4d9c-8b7a-6f5e4d3c2b1a"
		vol = "/var/lib/kubelet/pods/" + uid + "/volumes/kubernetes.io~csi/pvc-5d4c/mount"
	)
	files := fixture(t, "notprobed-dirshape-hung")
	r := analyzeFiles(t, files)
	f := only(t, r, "mount-not-probed")
	if f.Severity != analyze.Critical || f.Subject != "0:109" {
		t.Errorf("mount-not-probed %s %s, want critical for device 0:109:\n%s", f.Severity, f.Subject, dump(r))
	}
	wantIn(t, "summary", f.Summary, "/host"+vol, "was not probed", "dirshape's scan of "+vol+" did not answer either", "a volume of pod "+uid)
	wantIn(t, "explanation", f.Explanation, "stat did not answer within 2s", "request_wait_answer")
	wantIn(t, "evidence", evidenceText(f), "dirshape/shape.json", "\"status\":\"hung\"", "mountprobe/probes.json", "\"result\":\"unfinished\"")
	wantIn(t, "remediation", strings.Join(f.Remediation, "\n"), "echo 1 > /sys/fs/fuse/connections/109/abort")
	if strings.Contains(f.Summary, "task") {
		t.Errorf("the summary claims tasks the bundle does not have: %s", f.Summary)
	}

	// The same bundle without dirshape's answer: nothing ties the mount
	// to a hang, so it is only listed among the mounts not probed.
	delete(files, "dirshape/shape.json")
	r = analyzeFiles(t, files)
	f = only(t, r, "mount-not-probed")
	if f.Severity != analyze.Info || f.Subject != "mountprobe" || !strings.Contains(f.Summary, vol) {
		t.Errorf("without dirshape: %s %s %q, want the info list of mounts not probed", f.Severity, f.Subject, f.Summary)
	}
}
