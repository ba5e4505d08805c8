//go:build nofleet

package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// The node image's build (go build -tags nofleet) leaves out fleet collect
// and with it client-go, more than half of the binary: a node never drives
// its cluster. fleet analyze is there; fleet collect says where it is.
func newFleetCollectCommand() *cobra.Command {
	return &cobra.Command{
		Use:                "collect [NODE...]",
		Short:              "Not in this build (the node image's): use the release binary or package",
		DisableFlagParsing: true,
		RunE: func(*cobra.Command, []string) error {
			return errors.New("this nodesnap is the node image's build, without 'fleet collect' (it leaves the Kubernetes client out); run 'nodesnap fleet collect' from the release binary or package on a machine with a kubeconfig")
		},
	}
}
