package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/nodesnap/nodesnap/collectors"
)

func newCollectorsCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "collectors",
		Short: "List every collector: what it gathers, whether it runs by default, its deadline",
		Example: `  nodesnap collectors
  sudo nodesnap collect --only $(nodesnap collectors | awk 'NR>1 && $2=="on" {print $1}' | paste -sd,)`,
		Args: argsUsage(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tDEFAULT\tTIMEOUT\tGATHERS")
			for _, s := range collectors.All() {
				if s.Hidden {
					continue
				}
				on := "off"
				if s.DefaultEnabled {
					on = "on"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.Name, on, s.DefaultTimeout, s.Description)
			}
			return tw.Flush()
		},
	}
}
