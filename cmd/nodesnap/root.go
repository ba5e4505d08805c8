package main

import (
	"github.com/spf13/cobra"
)

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "nodesnap",
		Short: "Capture a sick Kubernetes node into one redacted bundle, and read it back",
		Long: `nodesnap captures everything needed to diagnose a sick Kubernetes node (mounts in
every namespace, who holds them, hung mounts, directory shapes, the kubelet's and the
runtime's own view, CSI state, logs) into one redacted tarball. No stale mount, hung
process or slow command can freeze it: every risky touch happens in a child process
with a deadline.

` + exitStatusHelp,
		Example: `  # on the node, as root: writes /var/tmp/nodesnap-<host>-<time>.tar.gz
  sudo nodesnap collect

  # later, anywhere: what went wrong, then the details
  nodesnap analyze nodesnap-node1-20261121T101500Z.tar.gz
  nodesnap inspect nodesnap-node1-20261121T101500Z.tar.gz
  nodesnap validate nodesnap-node1-20261121T101500Z.tar.gz

  # many nodes of a cluster, through the Kubernetes API (no SSH)
  nodesnap fleet collect --all --output-dir ./case-1234

  # send it to the ticket (a pre-signed URL, kept out of the process list)
  NODESNAP_UPLOAD_URL='https://...' nodesnap upload nodesnap-node1-20261121T101500Z.tar.gz`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       toolVersion(),
	}
	// The same line as nodesnap version.
	root.SetVersionTemplate("{{with .Annotations}}{{index . \"version\"}}{{end}}\n")
	root.Annotations = map[string]string{"version": readBuildInfo().String()}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return &flagError{err} })
	setHelp(root)
	root.AddCommand(
		newAnalyzeCommand(),
		newCollectCommand(),
		newCollectorsCommand(),
		newBundleCatCommand(),
		newDiffCommand(),
		newDocsCommand(),
		newExplainCommand(),
		newFleetCommand(),
		newHoldCommand(),
		newInspectCommand(),
		newManifestsCommand(),
		newUploadCommand(),
		newUploadPolicyCommand(),
		newValidateCommand(),
		newRedactCommand(),
		newReportCommand(),
		newVersionCommand(),
		newWatchCommand(),
	)
	return root
}

// argsUsage wraps a cobra positional-argument check so that its error is a
// usage error (exit status 2).
func argsUsage(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return &flagError{err}
		}
		return nil
	}
}
