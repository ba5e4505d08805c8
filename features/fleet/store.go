package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/features/fleet/podspec"
)

// Store is an object store the nodes' pods upload their bundles to
// (fleet collect --to s3://…): the run mints, for each node, a URL that
// lets its pod PUT that node's object and nothing else, and checks what
// arrived. No bundle byte passes through the API server or the kubelets.
// Keys are relative to the store's location (its bucket and prefix).
type Store interface {
	// PresignPut is a URL that lets its holder PUT one object, key, until
	// ttl has passed.
	PresignPut(ctx context.Context, key string, ttl time.Duration) (string, error)
	// Put writes a small object.
	Put(ctx context.Context, key string, body io.Reader, size int64) error
	// List calls fn with each object under prefix and its size.
	List(ctx context.Context, prefix string, fn func(key string, size int64) error) error
	// URL names key for people (s3://bucket/prefix/key).
	URL(key string) string
}

// Each Secret of a run holds the upload URLs of at most nodesPerSecret
// nodes: a pre-signed URL with a session token (web identity) is up to
// about 2 KiB, and a Secret at most 1 MiB. A thousand nodes take five
// Secrets.
const nodesPerSecret = 200

// uploadEnv is the variable collect reads its upload URL from.
const uploadEnv = "NODESNAP_UPLOAD_URL"

// ChecksumSuffix names the object beside a bundle that holds its sha256,
// as sha256sum prints it.
const ChecksumSuffix = ".sha256"

// secretName is the run's i-th Secret of upload URLs.
func secretName(runID string, i int) string { return fmt.Sprintf("%s-upload-%d", runID, i) }

var secretNamePattern = regexp.MustCompile(`^(nodesnap-fleet-[0-9a-f]{8})-upload-[0-9]+$`)

// objectKey is a node's bundle in the store: under the run's id, so that
// two runs into one place keep both.
func objectKey(runID, node string) string { return runID + "/" + node + ".tar.gz" }

// uploads are the run's upload URLs: where each node's is.
type uploads struct {
	secret map[string]string // node → its Secret
}

// makeUploads mints every node's URL (valid for the run's deadline and
// its clean-up) and writes them into the run's Secrets, a key per pod.
// A URL in a Secret, read by the kubelet into the collect container's
// environment, shows in no pod spec, and allows one PUT of one key.
func (c *created) makeUploads(ctx context.Context, o *Options, runID string, nodes []string) (*uploads, error) {
	u := &uploads{secret: make(map[string]string, len(nodes))}
	ttl := o.Timeout + cleanupTimeout
	for i := 0; i < len(nodes); i += nodesPerSecret {
		name := secretName(runID, i/nodesPerSecret)
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: o.Namespace, Labels: runLabels(runID),
			Annotations: map[string]string{ExpiresAnnotation: c.expires}}, Type: corev1.SecretTypeOpaque, Data: map[string][]byte{}}
		for _, node := range nodes[i:min(i+nodesPerSecret, len(nodes))] {
			url, err := o.Store.PresignPut(ctx, objectKey(runID, node), ttl)
			if err != nil {
				return nil, fmt.Errorf("signing the upload URL of node %s: %w", node, err)
			}
			sec.Data[podName(runID, node)] = []byte(url)
			u.secret[node] = name
		}
		got, err := o.Client.CoreV1().Secrets(o.Namespace).Create(ctx, sec, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("creating the run's Secret %s/%s of upload URLs: %w", o.Namespace, name, err)
		}
		c.mu.Lock()
		c.secrets[name] = made{true, got.UID}
		c.mu.Unlock()
	}
	return u, nil
}

// uploadTo points a pod's collect container at its node's URL.
func (u *uploads) uploadTo(pod *corev1.Pod, node string) {
	for i := range pod.Spec.InitContainers {
		env := pod.Spec.InitContainers[i].Env
		for j := range env {
			if env[j].Name == uploadEnv {
				env[j].ValueFrom = &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: u.secret[node]}, Key: pod.Name}}
			}
		}
	}
}

// resultOf is collect's result: from the collect container's termination
// message when it holds one (no request), else from its log.
func (r *runner) resultOf(ctx context.Context, pod, message string) (*CollectResult, error) {
	if strings.TrimSpace(message) != "" {
		if res, err := ParseCollectResult([]byte(strings.TrimSpace(message) + "\n")); err == nil {
			return res, nil
		}
	}
	log, err := r.o.PodIO.Logs(ctx, r.o.Namespace, pod, podspec.CollectContainer, resultLogLimit)
	if err != nil {
		return nil, fmt.Errorf("reading the collection's result from its log: %w", err)
	}
	return ParseCollectResult(log)
}

// stored reads the result of a node whose pod uploaded its bundle. The
// object itself is checked at the end of the run (checkStored), with one
// listing for all nodes.
func (r *runner) stored(ictx, gctx, nctx context.Context, i int, pod, message string) (Status, string) {
	r.update(i, func(n *NodeResult) { n.Phase = PhaseCopying })
	res, err := r.resultOf(nctx, pod, message)
	if err != nil {
		if nctx.Err() != nil {
			return r.expired(ictx, gctx, PhaseCopying, "")
		}
		return StatusFailed, err.Error()
	}
	node := r.rows[i].Node
	r.update(i, func(n *NodeResult) {
		n.NodePath, n.SHA256, n.Size = firstNonEmpty(res.HostPath, res.Path), res.SHA256, res.Size
	})
	switch {
	case res.Upload == nil:
		return StatusFailed, "the node wrote its bundle but did not upload it (its collect has no upload URL: an image older than this nodesnap?)"
	case !res.Upload.OK:
		why := res.Upload.Error
		if res.Upload.StatusCode != 0 {
			why = fmt.Sprintf("HTTP %d: %s", res.Upload.StatusCode, why)
		}
		return StatusFailed, fmt.Sprintf("the node's upload to the store failed (%s); its bundle stays on the node at %s", why, firstNonEmpty(res.HostPath, res.Path))
	}
	st, reason := StatusOK, ""
	if res.Status != bundle.BundleComplete {
		st, reason = StatusPartial, "the bundle is "+res.Status
		if len(res.Missing) > 0 {
			reason += ": " + strings.Join(res.Missing, "; ")
		}
	}
	r.update(i, func(n *NodeResult) {
		n.Object, n.Missing = r.o.Store.URL(objectKey(r.runID, node)), res.Missing
		n.Status, n.Reason = st, reason
	})
	return st, reason
}

// checkStored lists the run's objects once and keeps a node's bundle only
// where the store holds an object of the size the node wrote; each kept
// one gets its .sha256 beside it (the node's own checksum, which
// fleet analyze checks the bytes against). It returns the errors of the
// store itself (the listing), for the run's error.
func (r *runner) checkStored(ctx context.Context) error {
	sizes := map[string]int64{}
	prefix := r.runID + "/"
	err := r.o.Store.List(ctx, prefix, func(key string, size int64) error {
		if strings.HasSuffix(key, ".tar.gz") {
			sizes[key] = size
		}
		return nil
	})
	if err != nil {
		err = fmt.Errorf("listing the run's objects in the store (%s): %w", r.o.Store.URL(prefix), err)
	}
	var mu sync.Mutex
	var errs []error
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i := range r.rows {
		if r.rows[i].Object == "" || !r.rows[i].Status.HasBundle() {
			continue
		}
		key := objectKey(r.runID, r.rows[i].Node)
		got, ok := sizes[key]
		switch {
		case err != nil:
			r.update(i, func(n *NodeResult) {
				n.Status, n.Reason, n.Object = StatusFailed, "the node uploaded its bundle, but the store could not be listed to check it: "+err.Error(), ""
			})
			continue
		case !ok:
			r.update(i, func(n *NodeResult) {
				n.Status, n.Reason, n.Object = StatusFailed, "the node says it uploaded its bundle, but the store has no "+key, ""
			})
			continue
		case got != r.rows[i].Size:
			r.update(i, func(n *NodeResult) {
				n.Status, n.Reason, n.Object = StatusFailed, fmt.Sprintf("%v: the node wrote %d bytes, the store holds %d at %s; not kept", ErrChecksum, n.Size, got, key), ""
			})
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func(i int, key string) {
			defer wg.Done()
			defer func() { <-sem }()
			line := r.rows[i].SHA256 + "  " + r.rows[i].Node + ".tar.gz\n"
			if perr := r.o.Store.Put(ctx, key+ChecksumSuffix, strings.NewReader(line), int64(len(line))); perr != nil {
				mu.Lock()
				errs = append(errs, perr)
				mu.Unlock()
				r.update(i, func(n *NodeResult) {
					n.Status, n.Reason = StatusFailed, "writing the bundle's checksum beside it in the store: "+perr.Error()
				})
			}
		}(i, key)
	}
	wg.Wait()
	if len(errs) > 0 {
		return errors.Join(err, fmt.Errorf("writing %d checksum objects failed, the first: %w", len(errs), errs[0]))
	}
	return err
}

// storeReport writes fleet.json beside the run's bundles in the store.
func storeReport(ctx context.Context, st Store, runID string, rep *Report) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding %s: %w", ReportFile, err)
	}
	b = append(b, '\n')
	if err := st.Put(ctx, runID+"/"+ReportFile, bytes.NewReader(b), int64(len(b))); err != nil {
		return fmt.Errorf("writing %s into the store: %w", ReportFile, err)
	}
	return nil
}
