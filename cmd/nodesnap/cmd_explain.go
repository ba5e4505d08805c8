package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/nodesnap/nodesnap/engine/supervisor"
	"github.com/nodesnap/nodesnap/internal/textfit"
	"github.com/nodesnap/nodesnap/read/analyze"
)

// explainOptions are explain's flags; the ones after bundle are for a
// collection through the cluster (see cmd_explain_fleet.go).
type explainOptions struct {
	namespace, bundle, output string
	kubeconfig, context       string
	fleetNamespace, image     string
	outputDir                 string
	noRBAC                    bool
	nodeTimeout               time.Duration
	collectTimeout            time.Duration
}

func newExplainCommand() *cobra.Command {
	o := &explainOptions{}
	cmd := &cobra.Command{
		Use:   "explain pod/NAME",
		Short: "Say why a pod is stuck: the chain from its symptom to the node's evidence",
		Long: `Explain answers for one pod what 'nodesnap analyze' finds for the whole node: the pod's
symptom as the API shows it (stuck Terminating past its grace period, Pending or
ContainerCreating for long), then each node finding that causes it, most harmful first
(the kubelet's sync loop, then the pod's volumes), with its evidence and its fix. When
nothing on the node touches the pod, it says "nothing wrong found on the node for this pod"
and what was checked; a symptom no finding explains is said unexplained, with what the
bundle lacks.

With --bundle FILE it reads a bundle (one with the cluster collector's view of the node:
collected in a pod of the manifests, with --kubeconfig, or on a node with the kubelet's
kubeconfig). Without it, explain finds the pod's node through the API (your kubeconfig, as
kubectl) and collects that node as 'nodesnap fleet collect' does, into --output-dir. When
the node's kubelet cannot start the collection pod (Pending: a stuck sync loop starts no
pod, incident 003), it says so and prints the one command that collects on the node itself.

As a kubectl plugin: 'kubectl nodesnap explain pod/NAME -n NS'.

` + exitHelp("0  nothing wrong found on the node for this pod", exitLineReadFail+"; or the node could not be collected", exitLineUsage,
			"3  the pod is in trouble (explained or not), or the bundle has no view of it"),
		Example: `  nodesnap explain pod/db-0 -n shop --bundle nodesnap-node1-20261121T101500Z.tar.gz
  nodesnap explain pod/db-0 -n shop                  # collects the pod's node through the API
  kubectl nodesnap explain pod/db-0 -n shop -o json | jq '.details.chain[].finding'`,
		Args: argsUsage(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(o.output, "text", "json"); err != nil {
				return err
			}
			name, err := parsePodArg(args[0])
			if err != nil {
				return &flagError{err}
			}
			return runExplain(cmd.Context(), o, name, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.namespace, "namespace", "n", "default", "the pod's namespace")
	f.StringVar(&o.bundle, "bundle", "", "read this bundle instead of collecting the pod's node")
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "without --bundle: the kubeconfig file (default $KUBECONFIG, else ~/.kube/config)")
	f.StringVar(&o.context, "context", "", "without --bundle: the kubeconfig context")
	f.StringVar(&o.fleetNamespace, "collect-namespace", "nodesnap", "without --bundle: the namespace of the collection pod (privileged pods must be allowed there)")
	f.StringVar(&o.image, "image", "", "without --bundle: nodesnap's image (default "+DefaultImageRepo+":<this version>)")
	f.StringVar(&o.outputDir, "output-dir", "", "without --bundle: where the node's bundle goes (default ./nodesnap-explain-<UTC time>)")
	f.BoolVar(&o.noRBAC, "no-rbac", false, "without --bundle: create no RBAC: run as the nodesnap ServiceAccount of deploy/kubernetes/rbac.yaml")
	f.DurationVar(&o.nodeTimeout, "node-timeout", 5*time.Minute, "without --bundle: deadline of the node's collection (pod start, collection, copy)")
	f.DurationVar(&o.collectTimeout, "collect-timeout", 2*time.Minute, "without --bundle: nodesnap collect's --timeout on the node")
	addOutputFlag(cmd, &o.output, "text", "json")
	return cmd
}

// parsePodArg takes pod/NAME (or pods/NAME, or a bare NAME).
func parsePodArg(s string) (string, error) {
	kind, name, ok := strings.Cut(s, "/")
	if !ok {
		name, kind = s, "pod"
	}
	if kind != "pod" && kind != "pods" && kind != "po" {
		return "", fmt.Errorf("explain takes pod/NAME, not %q", s)
	}
	if name == "" || strings.ContainsAny(name, "/ \t\n") || len(name) > 253 {
		return "", fmt.Errorf("%q is not a pod name", name)
	}
	return name, nil
}

func runExplain(ctx context.Context, o *explainOptions, name string, stdout, stderr io.Writer) error {
	if o.bundle == "" {
		if o.nodeTimeout <= 0 || o.collectTimeout <= 0 {
			return &supervisor.UsageError{Msg: "--node-timeout and --collect-timeout must be positive"}
		}
		b, notCollected, err := collectPodNode(ctx, o, name, stderr)
		if err != nil {
			return err
		}
		if notCollected != nil {
			if err := writeExplanation(stdout, o.output, notCollected); err != nil {
				return err
			}
			return errors.New("the pod's node could not be collected: " + notCollected.Message)
		}
		o.bundle = b
	}
	rep, err := analyze.AnalyzeFile(ctx, o.bundle, analyze.Options{})
	if err != nil {
		return err
	}
	e := analyze.Explain(rep, o.namespace, name)
	if err := writeExplanation(stdout, o.output, e); err != nil {
		return err
	}
	if e.Verdict != analyze.VerdictNothingWrong {
		return &partialError{}
	}
	return nil
}

func writeExplanation(w io.Writer, output string, e *analyze.Explanation) error {
	if output == "json" {
		return writeJSONValue(w, e)
	}
	return analyze.WriteExplainText(w, e, textfit.Width(w))
}

func writeJSONValue(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
