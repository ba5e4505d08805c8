package main

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/nodesnap/nodesnap/features/objstore"
	"github.com/nodesnap/nodesnap/read/analyze"
	"github.com/nodesnap/nodesnap/read/fleetview"
)

// DefaultImageRepo is where releases publish the image; the tag is this
// binary's version.
const DefaultImageRepo = "ghcr.io/nodesnap/nodesnap"

func newFleetCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "fleet",
		Short: "Collect many nodes of a Kubernetes cluster through its API, and read their bundles together",
		Long: `Fleet drives Kubernetes to collect nodes with nodesnap, no SSH needed: 'fleet collect'
runs a pod on each selected node and copies its bundle back; 'fleet analyze' reads a
directory of bundles and says which nodes share which finding.

As a kubectl plugin (the binary installed as kubectl-nodesnap), the same commands run as
'kubectl nodesnap fleet ...'.`,
		Args: argsUsage(cobra.NoArgs),
	}
	cmd.AddCommand(newFleetCollectCommand(), newFleetAnalyzeCommand())
	return cmd
}

func newFleetAnalyzeCommand() *cobra.Command {
	output := "text"
	cmd := &cobra.Command{
		Use:   "analyze DIR|s3://BUCKET/PREFIX/",
		Short: "Analyse a directory of bundles together: which nodes have which finding, which nodes differ",
		Long: `Analyze reads every bundle of DIR (those its fleet.json names, as 'nodesnap fleet
collect' writes it; without one, every *.tar.gz, *.tar.zst and *.tgz in it that is not
hidden) and prints each finding with the nodes that have it, worst first, then the nodes
that differ from the rest: findings fewer than half of the nodes have, findings most nodes
have and they lack, another kernel, a partial bundle. Nodes fleet.json lists without a
bundle are named with the reason. 'nodesnap analyze BUNDLE' gives one node's details;
'nodesnap report DIR' writes the same as one HTML page.

Given s3://bucket/prefix/ (where 'fleet collect --to' put them), it reads every bundle
under it from the store, four at a time, each streamed and checked against the .sha256
beside it: a bundle whose bytes do not match, or that has none, is named with the
error and none of its findings counts. Each run's fleet.json there names the nodes
without a bundle. Credentials and endpoint are the AWS SDK's, as for 'fleet collect --to'.

` + exitHelp("0  no finding of severity warning or critical", "1  fatal: no bundle of DIR could be read", exitLineUsage,
			"3  a finding of severity warning or critical on at least one node"),
		Example: `  nodesnap fleet collect --all --output-dir ./case-1234
  nodesnap fleet analyze ./case-1234
  nodesnap fleet analyze -o json ./case-1234 | jq '.differences'
  nodesnap fleet analyze s3://support-cases/case-1234/`,
		Args: argsUsage(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output, "text", "json"); err != nil {
				return err
			}
			load := fleetview.Load
			if objstore.IsURL(args[0]) {
				load = loadStoreFleet
			}
			v, err := load(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if output == "json" {
				err = fleetview.WriteJSON(cmd.OutOrStdout(), v)
			} else {
				err = fleetview.WriteText(cmd.OutOrStdout(), v)
			}
			if err != nil {
				return err
			}
			readable := 0
			for _, n := range v.Nodes {
				if n.Report != nil {
					readable++
				}
			}
			if readable == 0 {
				return errors.New("no bundle in " + args[0] + " could be read")
			}
			if worst, ok := v.Worst(); ok && worst >= analyze.Warning {
				return &partialError{}
			}
			return nil
		},
	}
	addOutputFlag(cmd, &output, "text", "json")
	addFormatAlias(cmd, &output, "json")
	return cmd
}
