package cluster

import (
	"context"
	"errors"
	"os"
	"strings"

	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/collectors/hostfs"
)

// The hint a run without an API credential ends with names a kubeconfig
// this node has, found under --root, never one it might have: following
// a hint must not turn a complete run into a failed one.

// nodeKubeconfig is a kubeconfig a distribution leaves on its nodes.
type nodeKubeconfig struct {
	path string
	what string
	// admin: cluster-admin, far more than reading one node's view needs;
	// named only when no kubelet's own will do.
	admin bool
}

// distributionKubeconfigs are the kubeconfigs distributions keep on a
// node, the kubelets' (the node's identity) first. The running kubelet's
// --kubeconfig and KubeletKubeconfigs come before them.
var distributionKubeconfigs = []nodeKubeconfig{
	{"/etc/kubernetes/kubelet.conf", "kubeadm's kubelet kubeconfig", false},
	{"/var/lib/kubelet/kubeconfig", "the kubelet's kubeconfig (EKS, GKE, AKS)", false},
	{"/var/lib/rancher/k3s/agent/kubelet.kubeconfig", "k3s's kubelet kubeconfig", false},
	{"/var/lib/rancher/rke2/agent/kubelet.kubeconfig", "RKE2's kubelet kubeconfig", false},
	{"/var/snap/microk8s/current/credentials/kubelet.config", "microk8s's kubelet kubeconfig", false},
	{"/var/lib/k0s/kubelet.conf", "k0s's kubelet kubeconfig", false},
	{"/etc/rancher/k3s/k3s.yaml", "k3s's admin kubeconfig (cluster-admin)", true},
	{"/etc/rancher/rke2/rke2.yaml", "RKE2's admin kubeconfig (cluster-admin)", true},
	{"/var/snap/microk8s/current/credentials/client.config", "microk8s's admin kubeconfig (cluster-admin)", true},
	{"/var/lib/k0s/pki/admin.conf", "k0s's admin kubeconfig (cluster-admin)", true},
	{"/etc/kubernetes/admin.conf", "kubeadm's admin kubeconfig (cluster-admin)", true},
}

// rbacFix is the way that needs no kubeconfig on the node: nodesnap as a
// pod of its manifests, which the binary prints.
const rbacFix = "nodesnap manifests rbac | kubectl apply -f -   # then run nodesnap as its pod: nodesnap manifests job"

// noCredentialRemedy says what the run misses for want of a credential,
// and the commands that would give one: a kubeconfig found on this node
// (as nodesnap reaches it, under --root), or, when there is none, what to
// do instead.
func noCredentialRemedy(ctx context.Context, env *collectors.Env) {
	missing := []string{"the cluster's view of this node (Node, pods, volumes, events)"}
	reason := "no credential for the API server: not in a pod with a service account, no --kubeconfig, no $KUBECONFIG, no kubelet kubeconfig under the root"
	fix := kubeconfigFixes(ctx, env)
	if len(fix) == 0 {
		reason += "; no kubeconfig of a kubelet or a distribution (kubeadm, EKS, k3s, RKE2, microk8s, k0s) is on this node under " + rootOf(env)
		fix = []string{"nodesnap collect --kubeconfig FILE   # FILE: a kubeconfig that may read this node (get on nodes, pods, events)"}
	}
	env.Remedy(missing, reason, append(fix, rbacFix))
}

// kubeconfigFixes are the commands that use a kubeconfig present on this
// node: the running kubelet's and the distributions' that load, the
// kubelets' first and at most one admin one; "sudo" for one only root
// may read.
func kubeconfigFixes(ctx context.Context, env *collectors.Env) []string {
	rd := reader{ctx, env}
	var cands []nodeKubeconfig
	seen := map[string]bool{}
	// Only a kubelet the kernel vouches for is named (its refusals are
	// the collector's notes already).
	running, _ := kubeletKubeconfigs(ctx, env, rd)
	for _, k := range running {
		if !seen[k.path] {
			seen[k.path] = true
			cands = append(cands, nodeKubeconfig{path: k.path, what: k.what})
		}
	}
	for _, k := range distributionKubeconfigs {
		if !seen[k.path] {
			seen[k.path] = true
			cands = append(cands, k)
		}
	}
	var fix []string
	admin, sudo := false, false
	for _, k := range cands {
		if ctx.Err() != nil {
			break
		}
		_, err := loadKubeconfig(rd.host, k.path, "", k.what)
		switch {
		case err == nil && k.admin && (admin || len(fix) > 0):
		case err == nil:
			line := "nodesnap collect --kubeconfig " + seenPath(env, k.path) + "   # " + k.what
			if k.admin {
				line += ": more than this view needs"
				admin = true
			}
			fix = append(fix, env.Redact(line))
		case errors.Is(err, os.ErrPermission) && !sudo:
			sudo = true
			fix = append(fix, env.Redact("sudo nodesnap collect   # as root, which may read "+k.what+" "+k.path))
		}
	}
	return fix
}

// seenPath is where nodesnap reaches host path p: --kubeconfig is read
// as nodesnap sees it, not under --root.
func seenPath(env *collectors.Env, p string) string {
	return hostfs.Roots{Root: env.Root, Proc: env.Proc, Sys: env.Sys}.Seen(hostfs.Clean(p))
}

func rootOf(env *collectors.Env) string {
	if r := strings.TrimSpace(env.Root); r != "" {
		return r
	}
	return "/"
}
