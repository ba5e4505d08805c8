//go:build !nofleet

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodesnap/nodesnap/bundle/naming"
	"github.com/nodesnap/nodesnap/engine/supervisor"
	"github.com/nodesnap/nodesnap/features/fleet"
	"github.com/nodesnap/nodesnap/features/objstore"
	"github.com/nodesnap/nodesnap/internal/termsafe"
)

type fleetCollectOptions struct {
	kubeconfig, context, namespace string
	selector                       string
	all, noRBAC, pprof             bool
	maxParallel                    int
	timeout, nodeTimeout           time.Duration
	collectTimeout                 time.Duration
	image, outputDir, output       string
	to                             string
	qps                            float32
	burst                          int
}

var fleetExitHelp = exitHelp("0  every node's bundle is complete and verified",
	"1  no bundle at all (every node failed), or the run could not start",
	exitLineUsage,
	"3  some nodes failed or gave a partial bundle, but at least one bundle was saved; also when the run was interrupted or left objects in the cluster")

func newFleetCollectCommand() *cobra.Command {
	o := &fleetCollectOptions{}
	cmd := &cobra.Command{
		Use:   "collect [NODE...]",
		Short: "Collect the named, labelled or all nodes through the Kubernetes API",
		Long: `Collect runs nodesnap on each selected node as a pod pinned to it (the pod of
deploy/kubernetes/job.yaml: privileged, the host's PID and network namespaces, the node's
root at /host, every taint tolerated), at most --max-parallel at once, and copies each
bundle back through the API (exec streaming, as kubectl cp does; never through pod logs).
Each copy is checked against the sha256 the node computed before it is kept.

Choose the nodes by NODE names, by -l label selector, or --all. The kubeconfig and context
are kubectl's (--kubeconfig, $KUBECONFIG, --context).

In --output-dir (default ./nodesnap-fleet-<UTC time>): one bundle per node, <node>.tar.gz,
written under a temporary name and renamed only once verified, and fleet.json: every
node's status (ok, partial, unschedulable, image-pull-failure, timeout, node-not-ready,
failed, interrupted), the reason, the bundle, its sha256 and the durations. A node that
fails does not fail the others: partial results are the point.

The run creates, in namespace -n (made, with Pod Security Admission's privileged level,
if missing), a pod for each node, and for the run a ServiceAccount, a ClusterRole and a
ClusterRoleBinding named as the run allowing get on the run's nodes' nodes/pods,
nodes/healthz, nodes/configz, nodes/metrics and nodes/stats, and no other node's (for the
kubelet collector; each pod gets a 10-minute token). With --kubelet-pprof each node gets
its own three, named as its pod, with nodes/proxy on that node alone, for the goroutine
dumps and heap profile: that permission also allows exec into every pod of the node, for
as long as the run lasts. One watch follows all the pods; the client sends at most 50
requests a second. Everything is
labelled with the run's id and deleted at the end, also after Ctrl-C; a second Ctrl-C
abandons the clean-up and prints what was left. A run whose client dies leaves its objects
behind with an expiry (annotation nodesnap/expires): its pods end by themselves, and the
next fleet collect removes what is past its time. With --no-rbac nothing but pods is
created: the nodesnap ServiceAccount of deploy/kubernetes/rbac.yaml (nodesnap-pprof of
rbac-pprof.yaml with --kubelet-pprof), applied by an admin, is used.

Deadlines: --node-timeout bounds one node from its pod's creation to its bundle saved;
--timeout the whole run; --collect-timeout is collect's own deadline on the node. A pod
that no kubelet takes on, on a NotReady node, is given up after 30s.

With --to s3://bucket/prefix/ nothing is copied back: the run signs, for each node, a URL
that allows one PUT of <prefix><run id>/<node>.tar.gz until the run's deadline, puts the
URLs in Secrets of the run (200 nodes each; no URL in any pod spec), and each pod's collect
uploads its own bundle there. The run learns each result from its watch of the pods, then
lists the store once and keeps a node's bundle only where the store holds an object of the
size the node wrote; its .sha256 (the node's checksum) and fleet.json are written beside it.
'nodesnap fleet analyze s3://bucket/prefix/' reads them back, each checked against its
.sha256. The store's credentials are the AWS SDK's chain (environment, shared files, web
identity, instance metadata); an S3-compatible store is named by $AWS_ENDPOINT_URL_S3, which
the nodes must reach too.

On a terminal, a live line per node; otherwise a line per node as it ends. --output json
prints fleet.json's content instead of the summary.

` + fleetExitHelp,
		Example: `  # three nodes by name, into ./nodesnap-fleet-<time>
  nodesnap fleet collect node-1 node-2 node-3

  # every node of a pool, 20 at a time, another context
  nodesnap fleet collect -l node.kubernetes.io/instance-type=m5.large --max-parallel 20 --context prod

  # every node, into a directory of your choice, with the image from your registry
  nodesnap fleet collect --all --output-dir ./case-1234 --image registry.example.com/nodesnap:VERSION

  # as a kubectl plugin, where an admin ran: nodesnap manifests rbac | kubectl apply -f -
  kubectl nodesnap fleet collect --all --no-rbac

  # then: which nodes share which finding
  nodesnap fleet analyze ./case-1234

  # a thousand nodes: each uploads its own bundle to the store, nothing through the API server
  nodesnap fleet collect --all --max-parallel 100 --to s3://support-cases/case-1234/
  nodesnap fleet analyze s3://support-cases/case-1234/`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runFleetCollect(cmd.Context(), o, args, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "the kubeconfig file (default $KUBECONFIG, else ~/.kube/config)")
	f.StringVar(&o.context, "context", "", "the kubeconfig context (default its current context)")
	f.StringVarP(&o.namespace, "namespace", "n", "nodesnap", "the namespace of the run's pods (privileged pods must be allowed there)")
	f.StringVarP(&o.selector, "selector", "l", "", "collect the nodes with these labels (kubectl's selector syntax: key=value,key!=value,key in (a,b))")
	f.BoolVar(&o.all, "all", false, "collect every node of the cluster")
	f.IntVar(&o.maxParallel, "max-parallel", fleet.DefaultMaxParallel, "nodes collected at once")
	f.DurationVar(&o.timeout, "timeout", fleet.DefaultTimeout, "deadline of the whole run")
	f.DurationVar(&o.nodeTimeout, "node-timeout", fleet.DefaultNodeTimeout, "deadline of one node: its pod's start, the collection and the copy")
	f.DurationVar(&o.collectTimeout, "collect-timeout", 2*time.Minute, "nodesnap collect's --timeout on each node")
	f.StringVar(&o.image, "image", "", "nodesnap's image (default "+DefaultImageRepo+":<this version>)")
	f.BoolVar(&o.noRBAC, "no-rbac", false, "create no RBAC: run as the nodesnap ServiceAccount in -n of 'nodesnap manifests rbac' (nodesnap-pprof of rbac-pprof with --kubelet-pprof)")
	f.BoolVar(&o.pprof, "kubelet-pprof", false, "also take each kubelet's goroutine dumps and heap profile: each node then gets a role of its own with get on nodes/proxy for that node, which also allows exec into its pods while the run lasts")
	f.Float32Var(&o.qps, "kube-api-qps", 50, "requests a second the run sends to the API server at most (its pods' creations and deletions, one watch, the clean-up)")
	f.IntVar(&o.burst, "kube-api-burst", 100, "requests the run may send at once above --kube-api-qps")
	f.StringVar(&o.to, "to", "", "have each node's pod upload its bundle to this s3://bucket/prefix/ (under <run id>/<node>.tar.gz, its .sha256 and fleet.json beside it) with a URL signed for that key alone; no bundle passes through the API server (credentials: the AWS SDK's chain; endpoint: $AWS_ENDPOINT_URL_S3)")
	f.StringVar(&o.outputDir, "output-dir", "", "directory for the bundles and fleet.json (default ./nodesnap-fleet-<UTC time>); must not hold a fleet.json")
	addOutputFlag(cmd, &o.output, "text", "json")
	return cmd
}

func runFleetCollect(ctx context.Context, o *fleetCollectOptions, names []string, stdout, stderr io.Writer) error {
	if err := checkOutput(o.output, "text", "json"); err != nil {
		return err
	}
	if o.maxParallel <= 0 || o.timeout <= 0 || o.nodeTimeout <= 0 || o.collectTimeout <= 0 || o.qps <= 0 || o.burst <= 0 {
		return &supervisor.UsageError{Msg: "--max-parallel, --timeout, --node-timeout, --collect-timeout, --kube-api-qps and --kube-api-burst must be positive"}
	}
	chosen := 0
	for _, c := range []bool{len(names) > 0, o.selector != "", o.all} {
		if c {
			chosen++
		}
	}
	if chosen != 1 {
		return &supervisor.UsageError{Msg: "name the nodes (NODE...), or select them with -l SELECTOR, or use --all: exactly one of the three"}
	}
	if o.selector != "" {
		if _, err := labels.Parse(o.selector); err != nil {
			return &supervisor.UsageError{Msg: fmt.Sprintf("-l %q is not a label selector: %v", o.selector, err)}
		}
	}
	if o.to != "" {
		if _, err := objstore.ParseURL(o.to); err != nil {
			return &supervisor.UsageError{Msg: "--to: " + err.Error()}
		}
	}
	if o.image == "" {
		img, err := defaultImage(toolVersion())
		if err != nil {
			return err
		}
		o.image = img
	}
	if o.outputDir == "" {
		o.outputDir = "nodesnap-fleet-" + time.Now().UTC().Format(naming.TimeLayout)
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.kubeconfig
	kc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: o.context})
	cfg, err := kc.ClientConfig()
	if err != nil {
		return fmt.Errorf("reading the kubeconfig: %w", err)
	}
	raw, _ := kc.RawConfig()
	ctxName := o.context
	if ctxName == "" {
		ctxName = raw.CurrentContext
	}
	// Pod creations and deletions for hundreds of nodes: above client-go's
	// default of 5 requests a second, as kubectl is; one budget for the
	// whole client (fleet.NewClient). The API server's priority and
	// fairness answers 429 with Retry-After beyond its share, which
	// client-go waits out.
	cfg.QPS, cfg.Burst = o.qps, o.burst
	cfg.UserAgent = "nodesnap-fleet/" + toolVersion()
	cs, err := fleet.NewClient(cfg)
	if err != nil {
		return fmt.Errorf("connecting to the cluster: %w", err)
	}
	var store fleet.Store
	if o.to != "" {
		st, err := newFleetStore(ctx, o.to)
		if err != nil {
			return err
		}
		store = st
	}

	// The first signal interrupts the run (the clean-up still runs); the
	// second abandons the clean-up.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	abandon := make(chan struct{})
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		select {
		case <-sigs:
		case <-ctx.Done():
			return
		}
		fmt.Fprintln(stderr, "nodesnap: interrupted: deleting what the run created (Ctrl-C again to leave it)")
		cancel()
		select {
		case <-sigs:
			close(abandon)
		case <-time.After(5 * time.Minute):
		}
	}()

	if o.output == "text" {
		fmt.Fprintf(stderr, "nodesnap: fleet: context %s, namespace %s, image %s, into %s\n", ctxName, o.namespace, o.image, o.outputDir)
	}
	disp := newFleetProgress(stderr, o.output == "json")
	fo := fleet.Options{
		Client: cs, PodIO: fleet.NewPodIO(cfg, cs), Context: ctxName,
		Names: names, Selector: o.selector, All: o.all,
		Namespace: o.namespace, Image: o.image, NoRBAC: o.noRBAC, Pprof: o.pprof,
		MaxParallel: o.maxParallel, Timeout: o.timeout, NodeTimeout: o.nodeTimeout, CollectTimeout: o.collectTimeout,
		OutputDir: o.outputDir, Version: toolVersion(), Progress: disp.update, Abandon: abandon, Store: store,
	}
	rep, err := fleet.Run(ctx, fo)
	disp.finish()
	var ue *fleet.UsageError
	if errors.As(err, &ue) {
		return &supervisor.UsageError{Msg: ue.Msg}
	}
	if rep == nil {
		return err
	}
	if o.output == "json" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		fmt.Fprintln(stdout, string(b))
	} else {
		writeFleetSummary(stdout, rep, o.outputDir)
	}
	if len(rep.Leftovers) > 0 {
		fmt.Fprintf(stderr, "nodesnap: left in the cluster (delete them with: kubectl delete %s -l %s -A; kubectl delete clusterrole,clusterrolebinding -l %s):\n",
			"pods,serviceaccounts,secrets", fleet.RunSelector(rep.RunID), fleet.RunSelector(rep.RunID))
		for _, l := range rep.Leftovers {
			fmt.Fprintln(stderr, "  "+l)
		}
	}
	if err != nil {
		return err
	}
	switch rep.ExitStatus {
	case fleet.ExitAllOK:
		return nil
	case fleet.ExitPartial:
		return &partialError{}
	}
	return errors.New("no bundle was collected; fleet.json says why for each node")
}

// writeFleetSummary prints a line per node and where everything is.
func writeFleetSummary(w io.Writer, rep *fleet.Report, dir string) {
	// Node names and reasons come from the API server (pods' status
	// messages, events): shown escaped, one line per node.
	width := 4
	for _, n := range rep.Nodes {
		width = max(width, len(termsafe.Field(n.Node)))
	}
	fmt.Fprintf(w, "%-*s  %-18s  %7s  %s\n", width, "NODE", "STATUS", "TIME", "BUNDLE / REASON")
	for _, n := range rep.Nodes {
		what := n.Reason
		if n.Status.HasBundle() {
			what = firstOf(n.Bundle, n.Object)
			if n.Reason != "" {
				what += " (" + n.Reason + ")"
			}
		}
		fmt.Fprintf(w, "%-*s  %-18s  %6.1fs  %s\n", width, termsafe.Field(n.Node), n.Status, n.Durations.Total, termsafe.Field(what))
	}
	var counts []string
	for _, st := range []fleet.Status{fleet.StatusOK, fleet.StatusPartial, fleet.StatusUnschedulable, fleet.StatusImagePull,
		fleet.StatusTimeout, fleet.StatusNotReady, fleet.StatusFailed, fleet.StatusInterrupted} {
		if c := rep.Counts[st]; c > 0 {
			counts = append(counts, fmt.Sprintf("%d %s", c, st))
		}
	}
	fmt.Fprintf(w, "%d nodes: %s\n", len(rep.Nodes), strings.Join(counts, ", "))
	if rep.Counts[fleet.StatusImagePull] > 0 {
		fmt.Fprintf(w, "hint: the nodes could not get the image: import it on each node (ctr -n k8s.io images import nodesnap-<version>.oci.tar) or name one they can pull with --image\n")
	}
	fmt.Fprintf(w, "%s\n", filepath.Join(dir, fleet.ReportFile))
}

// defaultImage is the image fleet collect runs when --image is not given:
// the release image of this binary's own version. A binary built without a
// version (go build, go run: "devel…") names no image that exists — make
// image tags its archive with git describe — so it asks for --image instead
// of sending every node after a tag nobody built.
func defaultImage(version string) (string, error) {
	if version == "" || strings.HasPrefix(version, "devel") {
		return "", &supervisor.UsageError{Msg: fmt.Sprintf("this nodesnap was built without a release version (%s), so it has no image of its own to run on the nodes: "+
			"name one with --image (make image builds %s:<git describe> and prints its name), or build this binary with make build, whose default image is the one make image builds from the same commit", version, DefaultImageRepo)}
	}
	return DefaultImageRepo + ":" + version, nil
}

func firstOf(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
