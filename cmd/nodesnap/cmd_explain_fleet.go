//go:build !nofleet

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodesnap/nodesnap/bundle/naming"
	"github.com/nodesnap/nodesnap/features/fleet"
	"github.com/nodesnap/nodesnap/read/analyze"
)

// collectPodNode finds the pod's node through the API and collects it as
// fleet collect does. It returns the bundle's path, or, when there is no
// node to collect or it could not be collected, what to tell the user.
func collectPodNode(ctx context.Context, o *explainOptions, name string, stderr io.Writer) (string, *analyze.Explanation, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.kubeconfig
	kc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: o.context})
	cfg, err := kc.ClientConfig()
	if err != nil {
		return "", nil, fmt.Errorf("reading the kubeconfig: %w", err)
	}
	cfg.UserAgent = "nodesnap-explain/" + toolVersion()
	cs, err := fleet.NewClient(cfg)
	if err != nil {
		return "", nil, fmt.Errorf("connecting to the cluster: %w", err)
	}
	gctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	pod, err := cs.CoreV1().Pods(o.namespace).Get(gctx, name, metav1.GetOptions{})
	cancel()
	switch {
	case apierrors.IsNotFound(err):
		return "", nil, fmt.Errorf("no pod %s in namespace %s", name, o.namespace)
	case err != nil:
		return "", nil, fmt.Errorf("reading pod %s/%s: %w", o.namespace, name, err)
	}
	node := pod.Spec.NodeName
	if node == "" {
		e := &analyze.Explanation{Namespace: o.namespace, Pod: name, Verdict: analyze.VerdictNotScheduled,
			Message: "the pod is bound to no node, so no node's evidence can explain it: the scheduler has not placed it"}
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status != corev1.ConditionTrue && c.Message != "" {
				e.Message += " (" + c.Reason + ": " + c.Message + ")"
			}
		}
		return "", e, nil
	}
	if o.image == "" {
		o.image = DefaultImageRepo + ":" + toolVersion()
	}
	if o.outputDir == "" {
		o.outputDir = "nodesnap-explain-" + time.Now().UTC().Format(naming.TimeLayout)
	}
	if o.output == "text" {
		fmt.Fprintf(stderr, "nodesnap: pod %s/%s is on node %s: collecting it (image %s, into %s)\n", o.namespace, name, node, o.image, o.outputDir)
	}
	rep, err := fleet.Run(ctx, fleet.Options{
		Client: cs, PodIO: fleet.NewPodIO(cfg, cs), Names: []string{node},
		Namespace: o.fleetNamespace, Image: o.image, NoRBAC: o.noRBAC, MaxParallel: 1,
		NodeTimeout: o.nodeTimeout, Timeout: o.nodeTimeout + 2*time.Minute, CollectTimeout: o.collectTimeout,
		OutputDir: o.outputDir, Version: toolVersion(),
	})
	var ue *fleet.UsageError
	if errors.As(err, &ue) {
		return "", nil, &flagError{errors.New(ue.Msg)}
	}
	if rep == nil || len(rep.Nodes) == 0 {
		if err == nil {
			err = errors.New("the run collected nothing")
		}
		return "", nil, fmt.Errorf("collecting node %s: %w", node, err)
	}
	row := rep.Nodes[0]
	if row.Bundle != "" {
		return filepath.Join(o.outputDir, row.Bundle), nil, nil
	}
	e := &analyze.Explanation{Namespace: o.namespace, Pod: name, Node: node, Verdict: analyze.VerdictNotCollected,
		Message: fmt.Sprintf("node %s could not be collected through the cluster (%s): %s", node, row.Status, row.Reason)}
	if row.Status == fleet.StatusTimeout || row.Status == fleet.StatusNotReady {
		if !strings.Contains(row.Reason, fleet.PendingHint) && row.Status == fleet.StatusTimeout {
			e.Message += "; if the collection pod stayed Pending, the node's kubelet starts no pod"
		}
		e.HostCommand = fmt.Sprintf("%s   # then: nodesnap explain pod/%s -n %s --bundle <the bundle it names>", fleet.HostCollectCommand, name, o.namespace)
	}
	return "", e, nil
}
