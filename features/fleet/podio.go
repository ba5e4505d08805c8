package fleet

import (
	"bytes"
	"context"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/streaming/pkg/httpstream"
)

// PodIO is what the run needs of a pod beyond its object: the tail of a
// container's log, and a command's output streamed through exec.
type PodIO interface {
	// Logs returns the first limit bytes of a container's log.
	Logs(ctx context.Context, ns, pod, container string, limit int64) ([]byte, error)
	// Exec runs cmd in a container, its stdout streamed to stdout as it
	// comes (never buffered whole) and its stderr to stderr.
	Exec(ctx context.Context, ns, pod, container string, cmd []string, stdout, stderr io.Writer) error
}

// NewPodIO is PodIO on a real API server.
func NewPodIO(cfg *rest.Config, cs Client) PodIO { return &kubeIO{cfg: cfg, cs: cs} }

type kubeIO struct {
	cfg *rest.Config
	cs  Client
}

func (k *kubeIO) Logs(ctx context.Context, ns, pod, container string, limit int64) ([]byte, error) {
	rc, err := k.cs.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container, LimitBytes: &limit}).Stream(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rc.Close() }() // read-only
	var b bytes.Buffer
	_, err = io.Copy(&b, io.LimitReader(rc, limit))
	return b.Bytes(), err
}

// Exec is what kubectl exec (and kubectl cp) does: the exec subresource
// over WebSocket (Kubernetes 1.30 and later), SPDY where the server or a
// proxy refuses the upgrade. Without a TTY the stream is binary-safe.
func (k *kubeIO) Exec(ctx context.Context, ns, pod, container string, cmd []string, stdout, stderr io.Writer) error {
	params, err := parameterCodec()
	if err != nil {
		return err
	}
	req := k.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: container, Command: cmd, Stdout: true, Stderr: true}, params)
	spdy, err := remotecommand.NewSPDYExecutor(k.cfg, "POST", req.URL())
	if err != nil {
		return fmt.Errorf("exec in %s/%s: %w", ns, pod, err)
	}
	ws, err := remotecommand.NewWebSocketExecutor(k.cfg, "GET", req.URL().String())
	if err != nil {
		return fmt.Errorf("exec in %s/%s: %w", ns, pod, err)
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return fmt.Errorf("exec in %s/%s: %w", ns, pod, err)
	}
	return ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: stdout, Stderr: stderr})
}
