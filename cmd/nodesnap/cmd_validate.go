package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/nodesnap/nodesnap/bundle"
)

func newValidateCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "validate BUNDLE",
		Short: "Check a bundle: schema, every file's size and sha256, nothing missing or extra",
		Long: `Validate reads the whole bundle without extracting it: manifest.json must come first and
match the schema; every file it lists must be present with the recorded size and sha256;
nothing else may be present; no entry may be a link, absolute, or leave the bundle.

` + exitStatusHelp,
		Example: `  nodesnap validate nodesnap-node1-20261121T101500Z.tar.gz && echo intact`,
		Args:    argsUsage(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			rep, err := bundle.Validate(cmd.Context(), args[0])
			if err != nil {
				if rep != nil {
					for _, p := range rep.Problems {
						fmt.Fprintln(cmd.ErrOrStderr(), "  "+p)
					}
				}
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: valid (%d files checked, status %s)\n", args[0], rep.Checked, rep.Manifest.Status)
			return nil
		},
	}
}
