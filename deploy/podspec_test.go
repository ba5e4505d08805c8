package deploy_test

import (
	"bytes"
	"encoding/json"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/nodesnap/nodesnap/features/fleet/podspec"
)

// The manifests are the pods `nodesnap fleet collect` creates, field for
// field: deploy/kubernetes/*.yaml must equal what package podspec builds
// (with the placeholders for the image and the node), so that a change to
// one without the other fails here.
func TestManifestsEqualPodspec(t *testing.T) {
	objs := k8sObjects(t)
	same := func(what string, got, want any) {
		t.Helper()
		g, err1 := json.MarshalIndent(got, "", " ")
		w, err2 := json.MarshalIndent(want, "", " ")
		if err1 != nil || err2 != nil {
			t.Fatalf("%s: %v %v", what, err1, err2)
		}
		if !bytes.Equal(g, w) {
			t.Errorf("%s differs from package podspec's; the manifest:\n%s\npodspec:\n%s", what, g, w)
		}
	}
	same("deploy/kubernetes/job.yaml", objs["Job"][0].(*batchv1.Job), podspec.Job(imagePlaceholder, nodeNamePlaceholder))
	same("deploy/kubernetes/daemonset.yaml", objs["DaemonSet"][0].(*appsv1.DaemonSet), podspec.DaemonSet(imagePlaceholder))
	roles := map[string]*rbacv1.ClusterRole{}
	for _, o := range objs["ClusterRole"] {
		roles[o.(*rbacv1.ClusterRole).Name] = o.(*rbacv1.ClusterRole)
	}
	if roles["nodesnap"] == nil || roles["nodesnap-pprof"] == nil {
		t.Fatalf("no ClusterRole nodesnap or nodesnap-pprof in deploy/kubernetes")
	}
	same("the ClusterRole nodesnap of deploy/kubernetes/rbac.yaml", roles["nodesnap"].Rules, podspec.KubeletRules(""))
	same("the ClusterRole nodesnap-pprof of deploy/kubernetes/rbac-pprof.yaml", roles["nodesnap-pprof"].Rules, podspec.PprofRules(""))
	if roles["nodesnap-cluster"] == nil {
		t.Error("deploy/kubernetes/rbac.yaml has no ClusterRole nodesnap-cluster for the cluster collector")
	} else {
		same("the ClusterRole nodesnap-cluster of deploy/kubernetes/rbac.yaml", roles["nodesnap-cluster"].Rules, podspec.ClusterRules())
	}
	for k, v := range podspec.PodSecurityLabels() {
		if got := objs["Namespace"][0].(interface{ GetLabels() map[string]string }).GetLabels()[k]; got != v {
			t.Errorf("rbac.yaml's namespace has %s=%q, podspec says %q", k, got, v)
		}
	}
}
