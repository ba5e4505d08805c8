package cluster_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/collectors/cluster"
	"github.com/nodesnap/nodesnap/engine/supervisor/supervisortest"
	"github.com/nodesnap/nodesnap/test/skip"
)

const (
	apiToken    = "cluster-test-token-5d1f0a9b3c7e4d2a8f61"
	envSecret   = "s3cr3t-env-value-never-in-a-bundle"
	annotSecret = "annotation-password-value-0b9c"
	node        = "worker-1"
)

// fakeAPI is an API server: bearer-token auth, RBAC of the nodesnap-cluster
// ClusterRole (get/list on the collector's resources, nothing else: a
// Secret is 403), lists paged by limit/continue.
type fakeAPI struct {
	srv   *httptest.Server
	mu    sync.Mutex
	paths []string
	delay time.Duration
}

func pod(ns, name, uid, nodeName string, extra string) map[string]any {
	var p map[string]any
	raw := fmt.Sprintf(`{"metadata":{"name":%q,"namespace":%q,"uid":%q,"creationTimestamp":"2026-11-28T06:00:00Z",
	  "annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{\"password\":\"%s\"}"},
	  "ownerReferences":[{"apiVersion":"apps/v1","kind":"StatefulSet","name":"db","uid":"o1","controller":true}]},
	 "spec":{"nodeName":%q,"containers":[{"name":"c","image":"busybox","env":[{"name":"PW","value":%q}],
	   "volumeMounts":[{"name":"data","mountPath":"/data"}]}],
	   "volumes":[{"name":"data","persistentVolumeClaim":{"claimName":"data-%s"}},
	              {"name":"inline","csi":{"driver":"hostpath.csi.k8s.io","volumeAttributes":{"token":%q},"nodePublishSecretRef":{"name":"creds"}}}]},
	 "status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}],
	   "containerStatuses":[{"name":"c","ready":true,"restartCount":0,"state":{"running":{"startedAt":"2026-11-28T06:01:00Z"}}}]}%s}`,
		name, ns, uid, annotSecret, nodeName, envSecret, name, envSecret, extra)
	if err := json.Unmarshal([]byte(raw), &p); err != nil {
		panic(err)
	}
	return p
}

func newFakeAPI(t *testing.T) *fakeAPI {
	f := &fakeAPI{}
	pods := []map[string]any{}
	for i := range 5 {
		pods = append(pods, pod("prod", "db-"+strconv.Itoa(i), "uid-"+strconv.Itoa(i), node, ""))
	}
	now := time.Now().UTC()
	objects := map[string]any{
		"/api/v1/nodes/" + node: map[string]any{"metadata": map[string]any{"name": node, "uid": "n1"},
			"spec": map[string]any{"taints": []any{map[string]any{"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"}}},
			"status": map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "True"}},
				"allocatable": map[string]any{"cpu": "2", "pods": "110"},
				"images":      []any{map[string]any{"names": []string{"a"}}, map[string]any{"names": []string{"b"}}},
				"nodeInfo":    map[string]any{"kubeletVersion": "v1.34.4"}}},
		"/apis/storage.k8s.io/v1/csinodes/" + node: map[string]any{"metadata": map[string]any{"name": node},
			"spec": map[string]any{"drivers": []any{map[string]any{"name": "hostpath.csi.k8s.io", "nodeID": node}}}},
		"/apis/storage.k8s.io/v1/csidrivers/hostpath.csi.k8s.io": map[string]any{"metadata": map[string]any{"name": "hostpath.csi.k8s.io"}, "spec": map[string]any{"attachRequired": true}},
		"/apis/storage.k8s.io/v1/storageclasses/fast": map[string]any{"metadata": map[string]any{"name": "fast"}, "provisioner": "hostpath.csi.k8s.io",
			"parameters": map[string]any{"csi.storage.k8s.io/provisioner-secret-name": "very-secret-param"}},
	}
	for i := range 5 {
		sc := "fast"
		objects["/api/v1/namespaces/prod/persistentvolumeclaims/data-db-"+strconv.Itoa(i)] = map[string]any{
			"metadata": map[string]any{"name": "data-db-" + strconv.Itoa(i), "namespace": "prod"},
			"spec":     map[string]any{"volumeName": "pvc-" + strconv.Itoa(i), "storageClassName": sc}, "status": map[string]any{"phase": "Bound"}}
		objects["/api/v1/persistentvolumes/pvc-"+strconv.Itoa(i)] = map[string]any{
			"metadata": map[string]any{"name": "pvc-" + strconv.Itoa(i)},
			"spec": map[string]any{"storageClassName": sc, "csi": map[string]any{"driver": "hostpath.csi.k8s.io", "volumeHandle": "h" + strconv.Itoa(i),
				"nodeStageSecretRef": map[string]any{"name": "stage"}}}}
	}
	vas := []any{
		map[string]any{"metadata": map[string]any{"name": "va-here"}, "spec": map[string]any{"attacher": "hostpath.csi.k8s.io", "nodeName": node,
			"source": map[string]any{"persistentVolumeName": "pvc-0"}}, "status": map[string]any{"attached": true}},
		map[string]any{"metadata": map[string]any{"name": "va-elsewhere"}, "spec": map[string]any{"attacher": "x", "nodeName": "other",
			"source": map[string]any{"persistentVolumeName": "pvc-9"}}, "status": map[string]any{"attached": true}},
	}
	ev := func(kind, name, uid, reason string, at time.Time) any {
		return map[string]any{"metadata": map[string]any{"name": reason + name, "namespace": "prod"}, "involvedObject": map[string]any{"kind": kind, "name": name, "uid": uid},
			"reason": reason, "message": reason + " happened", "type": "Warning", "count": 3, "lastTimestamp": at.Format(time.RFC3339)}
	}
	lists := map[string][]any{
		"/api/v1/pods": func() []any {
			var out []any
			for _, p := range pods {
				out = append(out, p)
			}
			return out
		}(),
		"/apis/storage.k8s.io/v1/volumeattachments": vas,
		"/api/v1/events": {ev("Node", node, "n1", "NodeNotReady", now.Add(-time.Minute))},
		"/api/v1/namespaces/prod/events": {ev("Pod", "db-0", "uid-0", "FailedMount", now.Add(-2*time.Minute)),
			ev("Pod", "db-1", "uid-1", "Old", now.Add(-48*time.Hour)), ev("Pod", "gone", "uid-x", "NotOurs", now)},
	}
	f.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.paths = append(f.paths, r.URL.Path)
		delay := f.delay
		f.mu.Unlock()
		if delay > 0 {
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
				return
			}
		}
		if r.Header.Get("Authorization") != "Bearer "+apiToken {
			http.Error(w, `{"kind":"Status","message":"Unauthorized"}`, http.StatusUnauthorized)
			return
		}
		if r.Method != http.MethodGet || strings.Contains(r.URL.Path, "/secrets") || strings.Contains(r.URL.Path, "/configmaps") {
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprintf(w, `{"kind":"Status","message":"forbidden: cannot %s %s"}`, r.Method, r.URL.Path)
			return
		}
		if o, ok := objects[r.URL.Path]; ok {
			_ = json.NewEncoder(w).Encode(o)
			return
		}
		items, ok := lists[r.URL.Path]
		if !ok {
			http.Error(w, `{"kind":"Status","message":"not found"}`, http.StatusNotFound)
			return
		}
		q := r.URL.Query()
		if r.URL.Path == "/api/v1/pods" && q.Get("fieldSelector") != "spec.nodeName="+node {
			http.Error(w, `{"message":"pods must be listed by node"}`, http.StatusBadRequest)
			return
		}
		if r.URL.Path == "/api/v1/events" && !strings.Contains(q.Get("fieldSelector"), "involvedObject.name="+node) {
			http.Error(w, `{"message":"want a field selector"}`, http.StatusBadRequest)
			return
		}
		limit, _ := strconv.Atoi(q.Get("limit"))
		start, _ := strconv.Atoi(q.Get("continue"))
		if limit <= 0 {
			limit = len(items)
		}
		end := min(start+limit, len(items))
		cont := ""
		if end < len(items) {
			cont = strconv.Itoa(end)
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"metadata": map[string]any{"continue": cont}, "items": items[start:end]})
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// kubeconfig writes a kubeconfig for the fake API server.
func (f *fakeAPI) kubeconfig(t *testing.T, token string) string {
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.srv.Certificate().Raw})
	p := filepath.Join(t.TempDir(), "kubeconfig")
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
current-context: test
clusters:
- name: c
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: u
  user:
    token: %s
contexts:
- name: test
  context: {cluster: c, user: u}
`, f.srv.URL, base64.StdEncoding.EncodeToString(ca), token)
	if err := os.WriteFile(p, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func common(t *testing.T) collectors.Common {
	return collectors.Common{Root: t.TempDir(), Since: 24 * time.Hour}
}

func objects(t *testing.T, b *supervisortest.Bundle) layout.ClusterObjects {
	t.Helper()
	var o layout.ClusterObjects
	if err := json.Unmarshal(b.File(t, layout.ClusterObjectsPath), &o); err != nil {
		t.Fatal(err)
	}
	return o
}

func TestClusterCollectsTheNodesView(t *testing.T) {
	f := newFakeAPI(t)
	supervisortest.Flags(t, layout.DirCluster, "--kubeconfig", f.kubeconfig(t, apiToken), "--node-name", node, "--cluster-page-size", "2")
	b := supervisortest.Collect(t, layout.DirCluster, common(t))
	if b.Res.Status != "ok" {
		t.Fatalf("status %s (%s), notes %s", b.Res.Status, b.Res.Error, b.Notes())
	}
	o := objects(t, b)
	if o.Node == nil || o.Node.Status.ImagesCount != 2 || len(o.Node.Spec.Taints) != 1 || o.Node.Status.Allocatable["pods"] != "110" {
		t.Errorf("node: %+v", o.Node)
	}
	if len(o.Pods) != 5 || o.Pods[0].Spec.Volumes[0].PersistentVolumeClaim.ClaimName != "data-db-0" || o.Pods[0].Metadata.OwnerReferences[0].Kind != "StatefulSet" {
		t.Errorf("pods: %d %+v", len(o.Pods), o.Pods)
	}
	if len(o.PVCs) != 5 || len(o.PVs) != 5 || o.PVs[0].Spec.CSI.VolumeHandle != "h0" {
		t.Errorf("claims %d, volumes %d", len(o.PVCs), len(o.PVs))
	}
	if len(o.VolumeAttachments) != 1 || o.VolumeAttachments[0].Metadata.Name != "va-here" {
		t.Errorf("volume attachments of another node kept, or this one's lost: %+v", o.VolumeAttachments)
	}
	if o.CSINode == nil || len(o.CSIDrivers) != 1 || len(o.StorageClasses) != 1 {
		t.Errorf("csinode %v, drivers %d, classes %d", o.CSINode, len(o.CSIDrivers), len(o.StorageClasses))
	}
	var reasons []string
	for _, e := range o.Events {
		reasons = append(reasons, e.Reason)
	}
	if strings.Join(reasons, ",") != "FailedMount,NodeNotReady" {
		t.Errorf("events %q: want the node's and this node's pods' within --since, oldest first", reasons)
	}
	var req layout.ClusterRequests
	if err := json.Unmarshal(b.File(t, layout.ClusterRequestsPath), &req); err != nil {
		t.Fatal(err)
	}
	for _, r := range req.Requests {
		if r.Resource == "pods" && r.Pages != 3 {
			t.Errorf("pods listed in %d pages, want 3 of 2", r.Pages)
		}
	}
	for _, p := range f.paths {
		if strings.Contains(p, "secret") || strings.Contains(p, "configmap") {
			t.Errorf("the collector asked for %s", p)
		}
	}
	for _, s := range []string{apiToken, envSecret, annotSecret, "very-secret-param", "nodePublishSecretRef", "stage"} {
		supervisortest.AssertAbsent(t, b, s)
	}
}

func TestClusterWithoutCredentialIsUnsupported(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	if _, err := os.Stat(cluster.ServiceAccountDir); err == nil {
		skip.Because(t, "this machine is a pod with a service account")
	}
	b := supervisortest.Collect(t, layout.DirCluster, common(t))
	if b.Res.Status != "unsupported" || !strings.Contains(b.Res.Error, "no credential") {
		t.Errorf("status %s, error %q", b.Res.Status, b.Res.Error)
	}
	if len(b.Res.Remedies) == 0 {
		t.Error("no remedy names how to give a credential")
	}
}

func TestClusterRejectedToken(t *testing.T) {
	f := newFakeAPI(t)
	supervisortest.Flags(t, layout.DirCluster, "--kubeconfig", f.kubeconfig(t, "wrong-token-value-123456"), "--node-name", node)
	b := supervisortest.Collect(t, layout.DirCluster, common(t))
	if b.Res.Status == "ok" || !strings.Contains(b.Res.Error+b.Notes(), "401") {
		t.Errorf("status %s, error %q, notes %s", b.Res.Status, b.Res.Error, b.Notes())
	}
}

func TestClusterUnverifiedServerGetsNoToken(t *testing.T) {
	f := newFakeAPI(t)
	kc := f.kubeconfig(t, apiToken)
	raw, _ := os.ReadFile(kc)
	ca := base64.StdEncoding.EncodeToString(otherCA(t))
	fixed := strings.Replace(string(raw), "certificate-authority-data: ", "certificate-authority-data: "+ca+"\n    x: ", 1)
	_ = os.WriteFile(kc, []byte(fixed), 0o600)
	supervisortest.Flags(t, layout.DirCluster, "--kubeconfig", kc, "--node-name", node)
	b := supervisortest.Collect(t, layout.DirCluster, common(t))
	if b.Res.Status == "ok" || !strings.Contains(b.Res.Error+b.Notes(), "certificate") {
		t.Errorf("status %s, error %q, notes %s", b.Res.Status, b.Res.Error, b.Notes())
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.paths) != 0 {
		t.Errorf("requests reached the server despite an unverified certificate: %q", f.paths)
	}
}

func TestClusterSlowAPIServerIsPartial(t *testing.T) {
	f := newFakeAPI(t)
	f.delay = 3 * time.Second
	supervisortest.Flags(t, layout.DirCluster, "--kubeconfig", f.kubeconfig(t, apiToken), "--node-name", node, "--cluster-request-timeout", "500ms")
	start := time.Now()
	b := supervisortest.Collect(t, layout.DirCluster, common(t))
	if b.Res.Status == "ok" || !strings.Contains(b.Res.Error+b.Notes(), "did not answer within") {
		t.Errorf("status %s, error %q, notes %s", b.Res.Status, b.Res.Error, b.Notes())
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("a slow API server cost %s: requests after the first timeout should not be made", d)
	}
}

// otherCA is a self-signed CA certificate that signed nothing the fake
// API server shows.
func otherCA(t *testing.T) []byte {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "another-ca"}, IsCA: true, BasicConstraintsValid: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func TestAttachmentName(t *testing.T) {
	// The attach/detach controller names a CSI volume's attachment
	// csi-<hex sha256 of handle+driver+node> (kubernetes
	// pkg/volume/csi/csi_attacher.go, getAttachmentName); the value below
	// is sha256("hdn") computed apart.
	const want = "csi-9072ed11cc1acb5fa433a877ff339b6311d013f33bddd1d0092711a8ace5b16d"
	if got := cluster.AttachmentName("h", "d", "n"); got != want {
		t.Errorf("AttachmentName = %s, want %s", got, want)
	}
}
