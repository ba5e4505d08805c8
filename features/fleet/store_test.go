package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodesnap/nodesnap/features/fleet/podspec"
)

// memStore is an object store in memory whose pre-signed URLs name their
// key and carry a signature the store checks.
type memStore struct {
	mu      sync.Mutex
	objects map[string][]byte
	signed  map[string]time.Duration // key → ttl of its URL
	lists   int
}

func newMemStore() *memStore {
	return &memStore{objects: map[string][]byte{}, signed: map[string]time.Duration{}}
}

func (m *memStore) PresignPut(_ context.Context, key string, ttl time.Duration) (string, error) {
	m.mu.Lock()
	m.signed[key] = ttl
	m.mu.Unlock()
	return "https://store.test/case/" + key + "?X-Amz-Signature=" + fmt.Sprintf("%x", len(key)), nil
}

// put is a pod's PUT to a URL PresignPut made.
func (m *memStore) put(u string, body []byte) error {
	p, err := url.Parse(u)
	if err != nil {
		return err
	}
	key := strings.TrimPrefix(p.Path, "/case/")
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.signed[key]; !ok || p.Query().Get("X-Amz-Signature") == "" {
		return fmt.Errorf("403: %s was not signed", key)
	}
	m.objects[key] = body
	return nil
}

func (m *memStore) Put(_ context.Context, key string, body io.Reader, _ int64) error {
	b, err := io.ReadAll(body)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.objects[key] = b
	m.mu.Unlock()
	return nil
}

func (m *memStore) List(_ context.Context, prefix string, fn func(string, int64) error) error {
	m.mu.Lock()
	m.lists++
	var keys []string
	for k := range m.objects {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	m.mu.Unlock()
	slices.Sort(keys)
	for _, k := range keys {
		m.mu.Lock()
		n := int64(len(m.objects[k]))
		m.mu.Unlock()
		if err := fn(k, n); err != nil {
			return err
		}
	}
	return nil
}

func (m *memStore) URL(key string) string { return "s3://bucket/case/" + key }

// What a node's pod does with an upload URL (fleet collect --to).
type uploadBehaviour int

const (
	uploadOK    uploadBehaviour = iota // the bundle arrives
	uploadFails                        // the store refuses it (403)
	uploadLies                         // says it uploaded, nothing arrived
	uploadTrunc                        // half the bundle arrived
)

// With a store, each node's pod uploads its own bundle with a URL the
// run signed for that node's key alone, read from the run's Secret (no
// URL in any pod spec); the run reads the result from the pod's status
// (no log, no exec), keeps only what the store holds at the size the node
// wrote, writes its .sha256 beside it and fleet.json, and removes its
// Secrets at the end.
func TestRunToStore(t *testing.T) {
	nodes := map[string]behaviour{}
	how := map[string]uploadBehaviour{}
	const n = 430 // three Secrets
	for i := range n {
		name := fmt.Sprintf("node-%03d", i)
		nodes[name] = healthy
		how[name] = uploadOK
	}
	how["node-001"], how["node-002"], how["node-003"] = uploadFails, uploadLies, uploadTrunc
	s := newSim(t, nodes, 300)
	st := newMemStore()
	var mu sync.Mutex
	var specs []string
	s.onCreate = func(pod *corev1.Pod, sn *simNode) {
		node := pod.Spec.NodeName
		b, _ := json.Marshal(pod.Spec)
		mu.Lock()
		specs = append(specs, string(b))
		mu.Unlock()
		var ref *corev1.SecretKeySelector
		for _, e := range pod.Spec.InitContainers[0].Env {
			if e.Name == uploadEnv && e.ValueFrom != nil {
				ref = e.ValueFrom.SecretKeyRef
			}
		}
		if ref == nil {
			t.Errorf("pod %s: no upload URL from a Secret", pod.Name)
			return
		}
		// As the kubelet reads it (a reactor may not call the client).
		obj, err := s.cs.Tracker().Get(corev1.SchemeGroupVersion.WithResource("secrets"), pod.Namespace, ref.Name)
		if err != nil {
			t.Errorf("pod %s: its Secret %s: %v", pod.Name, ref.Name, err)
			return
		}
		u := string(obj.(*corev1.Secret).Data[ref.Key])
		var buf bytes.Buffer
		_, _ = io.Copy(&buf, bundleStream(node, sn.size))
		up := &UploadResult{OK: true, StatusCode: 200}
		switch how[node] {
		case uploadOK:
			err = st.put(u, buf.Bytes())
		case uploadTrunc:
			err = st.put(u, buf.Bytes()[:buf.Len()/2])
		case uploadFails:
			up = &UploadResult{StatusCode: 403, Error: "AccessDenied: Request has expired"}
		}
		if err != nil {
			up = &UploadResult{StatusCode: 403, Error: err.Error()}
		}
		res, _ := json.Marshal(CollectResult{Path: "/output/nodesnap-" + node + ".tar.gz", Size: sn.size, SHA256: sn.sum, Status: "complete", Upload: up})
		pod.Status.InitContainerStatuses[0].State.Terminated.Message = string(res)
	}
	o := s.options(t.TempDir())
	o.Store = st
	o.MaxParallel = 16
	o.NotReadyGrace = time.Minute
	o.Timeout = 10 * time.Minute
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	rows := rowsByNode(rep)
	for node, hw := range how {
		row := rows[node]
		key := objectKey(rep.RunID, node)
		switch hw {
		case uploadOK:
			if row.Status != StatusOK || row.Object != st.URL(key) || row.Bundle != "" {
				t.Errorf("%s: %s %q object %q bundle %q", node, row.Status, row.Reason, row.Object, row.Bundle)
				continue
			}
			want := nodes2sum(s, node) + "  " + node + ".tar.gz\n"
			if got := string(st.objects[key+ChecksumSuffix]); got != want {
				t.Errorf("%s: checksum object %q, want %q", node, got, want)
			}
		case uploadFails:
			if row.Status != StatusFailed || !strings.Contains(row.Reason, "403") || row.Object != "" {
				t.Errorf("%s: %s %q, want failed with the store's 403", node, row.Status, row.Reason)
			}
		case uploadLies:
			if row.Status != StatusFailed || !strings.Contains(row.Reason, "the store has no") || row.Object != "" {
				t.Errorf("%s: %s %q, want failed: not in the store", node, row.Status, row.Reason)
			}
		case uploadTrunc:
			if row.Status != StatusFailed || !strings.Contains(row.Reason, ErrChecksum.Error()) || row.Object != "" {
				t.Errorf("%s: %s %q, want a size mismatch", node, row.Status, row.Reason)
			}
			if _, ok := st.objects[key+ChecksumSuffix]; ok {
				t.Errorf("%s: a checksum was written for a truncated bundle", node)
			}
		}
	}
	for key, ttl := range st.signed {
		if ttl < o.Timeout || ttl > o.Timeout+cleanupTimeout {
			t.Errorf("%s signed for %s: want the run's deadline", key, ttl)
		}
	}
	if len(st.signed) != n {
		t.Errorf("%d URLs signed for %d nodes", len(st.signed), n)
	}
	if _, ok := st.objects[rep.RunID+"/"+ReportFile]; !ok {
		t.Errorf("no %s in the store", ReportFile)
	}
	if s.execs != 0 || s.logs != 0 || st.lists != 1 {
		t.Errorf("%d execs, %d log reads, %d listings of the store; want none, none and one", s.execs, s.logs, st.lists)
	}
	for _, sp := range specs {
		if strings.Contains(sp, "X-Amz-Signature") || strings.Contains(sp, "store.test") {
			t.Fatalf("a pod spec holds an upload URL: %s", sp)
		}
	}
	secrets, _ := s.cs.CoreV1().Secrets("").List(context.Background(), metav1.ListOptions{})
	if len(secrets.Items) != 0 {
		t.Errorf("%d Secrets left", len(secrets.Items))
	}
	checkClean(t, s, true)
}

func nodes2sum(s *sim, node string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nodes[node].sum
}

// The run's Secrets are what the budget allows: one per nodesPerSecret
// nodes, each a key per pod, labelled and expiring as the rest of the run.
func TestUploadSecrets(t *testing.T) {
	nodes := map[string]behaviour{}
	for i := range 2*nodesPerSecret + 1 {
		nodes[fmt.Sprintf("n%04d", i)] = healthy
	}
	s := newSim(t, nodes, 10)
	st := newMemStore()
	var mu sync.Mutex
	seen := map[string]*corev1.Secret{}
	s.onCreate = func(pod *corev1.Pod, _ *simNode) {
		obj, err := s.cs.Tracker().Get(corev1.SchemeGroupVersion.WithResource("secrets"), pod.Namespace, pod.Spec.InitContainers[0].Env[0].ValueFrom.SecretKeyRef.Name)
		if err != nil {
			t.Error(err)
			return
		}
		mu.Lock()
		sec := obj.(*corev1.Secret)
		seen[sec.Name] = sec
		mu.Unlock()
	}
	o := s.options(t.TempDir())
	o.Store = st
	o.MaxParallel = 32
	rep, _ := Run(context.Background(), o)
	if len(seen) != 3 {
		t.Fatalf("%d Secrets for %d nodes, want 3", len(seen), len(nodes))
	}
	keys := 0
	for name, sec := range seen {
		if !fleetMade(sec.ObjectMeta) || sec.Labels[RunLabel] != rep.RunID {
			t.Errorf("Secret %s would not be swept as the run's: %v", name, sec.ObjectMeta)
		}
		if podspec.Namespace != sec.Namespace {
			t.Errorf("Secret %s in %s", name, sec.Namespace)
		}
		keys += len(sec.Data)
	}
	if keys != len(nodes) {
		t.Errorf("%d URLs in the Secrets, want one per node (%d)", keys, len(nodes))
	}
}
