package analyze_test

import (
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/read/analyze"
)

// Incident 004 explained by the kubelet's version, and by what its log
// shows. The fixture is the original incident's minikube node: kubelet
// v1.29.3 (its binary's path), whose log shows TearDown failing with EBUSY.
func TestIncident004ByKubeletVersion(t *testing.T) {
	const (
		uid    = "9a42f711-028a-4ca2-802a-0e4db734592d"
		volDir = "/var/lib/kubelet/pods/" + uid + "/volumes/kubernetes.io~csi/pvc-ea3178bf-fc12-432c-a01b-8389b04c508e"
	)
	// metrics is the kubelet's own kubernetes_build_info line, as its
	// /metrics serves it.
	metrics := func(v string) []byte {
		return []byte("# HELP kubernetes_build_info [ALPHA] A metric with a constant '1' value labeled by major, minor, git version, git commit, git tree state, build date, Go version, and compiler from which Kubernetes was built, and platform on which it is running.\n" +
			"# TYPE kubernetes_build_info gauge\n" +
			`kubernetes_build_info{build_date="2026-02-10T00:00:00Z",compiler="gc",git_commit="0123456789abcdef",git_tree_state="clean",git_version="` + v + `",go_version="go1.24.12",major="1",minor="34",platform="linux/amd64"} 1` + "\n")
	}
	cases := []struct {
		name     string
		edit     func(files map[string][]byte)
		version  string
		summary  []string
		explain  []string
		fix      string
		notInFix string
	}{
		{name: "v1.29.3 whose log shows EBUSY", version: "v1.29.3",
			summary: []string{"fails with EBUSY"}, explain: []string{"The kubelet is v1.29.3 (from the running kubelet's binary path", "its log shows TearDown failing with EBUSY"},
			fix: "The kubelet's next TearDown retry", notInFix: "rm -r"},
		{name: "v1.29.3, no EBUSY in its log", version: "v1.29.3", edit: func(f map[string][]byte) { delete(f, "journal/kubelet.log") },
			summary: []string{"removes nothing and reports TearDown succeeded"},
			explain: []string{"since 1.26", "STATX_ATTR_MOUNT_ROOT", "--v=3", "not a directory"},
			fix:     "findmnt " + volDir + "/mount || rm -r " + volDir, notInFix: "TearDown retry"},
		{name: "v1.34.4 from metrics", version: "v1.34.4", edit: func(f map[string][]byte) {
			delete(f, "journal/kubelet.log")
			f["kubelet/metrics.txt"] = metrics("v1.34.4")
		}, summary: []string{"TearDown succeeded"}, explain: []string{"The kubelet is v1.34.4 (from kubernetes_build_info in kubelet/metrics.txt)"}, fix: "rm -r " + volDir},
		{name: "v1.25.3 from metrics", version: "v1.25.3", edit: func(f map[string][]byte) {
			delete(f, "journal/kubelet.log")
			f["kubelet/metrics.txt"] = metrics("v1.25.3")
		}, summary: []string{"fails with EBUSY"}, explain: []string{"v1.25.3", "before 1.26 this is what its TearDown does"}, fix: "TearDown retry", notInFix: "rm -r"},
		{name: "version unknown", edit: func(f map[string][]byte) {
			delete(f, "journal/kubelet.log")
			delete(f, "processes/tasks.json")
		}, summary: []string{"fails with EBUSY"}, explain: []string{"The kubelet's version is unknown", "A kubelet 1.26 or newer instead"},
			fix: "On a kubelet 1.26 or newer, remove the volume directory it left as well"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			files := fixture(t, "incident004-csi-published-lost")
			if tc.edit != nil {
				tc.edit(files)
			}
			r := analyzeFiles(t, files)
			if r.KubeletVersion != tc.version {
				t.Errorf("kubelet version %q (from %q), want %q", r.KubeletVersion, r.KubeletVersionFrom, tc.version)
			}
			f := only(t, r, "csi-published-state-lost")
			wantIn(t, "summary", f.Summary, tc.summary...)
			wantIn(t, "explanation", f.Explanation, tc.explain...)
			fixes := strings.Join(f.Remediation, "\n")
			wantIn(t, "remediation", fixes, tc.fix)
			if tc.notInFix != "" && strings.Contains(fixes, tc.notInFix) {
				t.Errorf("remediation has %q, which this kubelet does not need:\n%s", tc.notInFix, fixes)
			}
		})
	}
}

// After a manual unmount on a kubelet ≥ 1.26 the leftover vol_data.json
// stops the orphan cleanup; the line is the one a v1.34 kubelet logs every
// 2 s.
func TestOrphanedPodVolumesDirNotADirectory(t *testing.T) {
	const uid = "7c1d2e3f-4a5b-4c6d-8e9f-0a1b2c3d4e5f"
	line := `2026-11-21T09:10:02.000100+00:00 node1 kubelet[812]: E1121 09:10:02.000100     812 kubelet_volumes.go:263] "There were many similar errors. Turn up verbosity to see them." err="orphaned pod \"` + uid + `\" found, but error occurred when trying to remove the volumes dir: not a directory" numErrs=1` + "\n"
	r := analyzeFiles(t, map[string][]byte{
		"host/summary.json":   []byte(`{"hostname":"node1"}`),
		"journal/kubelet.log": []byte(line + strings.Replace(line, "09:10:02", "09:10:04", 2)),
	})
	f := only(t, r, "orphaned-pod-volume-paths")
	if f.Severity != analyze.Warning || f.Subject != uid {
		t.Errorf("%s %s", f.Severity, f.Subject)
	}
	wantIn(t, "summary", f.Summary, "volumes directory", "2 log lines")
	wantIn(t, "explanation", f.Explanation, "vol_data.json", "every 2 s", "The kubelet's version is unknown")
	wantIn(t, "remediation", strings.Join(f.Remediation, "\n"), "rm -r /var/lib/kubelet/pods/"+uid+"/volumes/kubernetes.io~csi/*")
	if r.Signatures["orphaned-pod-volumes-dir-not-removed"] != 2 {
		t.Errorf("signatures %v", r.Signatures)
	}
}
