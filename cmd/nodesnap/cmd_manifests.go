package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/nodesnap/nodesnap/deploy"
)

func newManifestsCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "manifests [NAME...]",
		Short: "Print nodesnap's Kubernetes manifests (RBAC, Job, DaemonSet), built into the binary",
		Long: `Manifests prints the Kubernetes manifests of deploy/kubernetes, as this binary was built
with them, so that they can be applied wherever the binary is: no copy of the repository is
needed. With no NAME it lists them; with names it prints those, one YAML stream.

  rbac         the nodesnap namespace, its ServiceAccount and least-privilege roles
  rbac-pprof   opt-in: the kubelet's goroutine dumps (get on nodes/proxy; read its risk)
  job          collect one node (replace NODE_NAME and NODESNAP_IMAGE)
  daemonset    collect every node, then watch

` + exitHelp(exitLineOK, exitLineUsage+" (a NAME that is not a manifest)"),
		Example: `  nodesnap manifests rbac | kubectl apply -f -
  nodesnap manifests rbac rbac-pprof | kubectl apply -f -
  nodesnap manifests job | sed -e 's|NODE_NAME|node-1|' -e 's|NODESNAP_IMAGE|my/nodesnap:tag|' | kubectl apply -f -`,
		Args: argsUsage(cobra.ArbitraryArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runManifests(cmd.OutOrStdout(), args)
		},
	}
}

func runManifests(w io.Writer, names []string) error {
	if len(names) == 0 {
		for _, m := range deploy.Manifests() {
			if _, err := fmt.Fprintf(w, "%-12s %s\n", m.Name, m.File); err != nil {
				return err
			}
		}
		return nil
	}
	var ms []deploy.Manifest
	for _, n := range names {
		m, err := deploy.Lookup(n)
		if err != nil {
			return &flagError{err}
		}
		ms = append(ms, m)
	}
	for i, m := range ms {
		if i > 0 {
			if _, err := io.WriteString(w, "---\n"); err != nil {
				return err
			}
		}
		if _, err := w.Write(m.Data); err != nil {
			return err
		}
	}
	return nil
}
