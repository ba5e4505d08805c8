package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/internal/termsafe"
	"github.com/nodesnap/nodesnap/internal/textfit"
)

type collectorOption struct {
	Flag    string `json:"flag"`
	Type    string `json:"type"`
	Default string `json:"default"`
	Usage   string `json:"usage"`
}

type collectorInfo struct {
	Name           string            `json:"name"`
	DefaultEnabled bool              `json:"default_enabled"`
	Timeout        string            `json:"timeout"`
	Gathers        string            `json:"gathers"`
	Needs          string            `json:"needs"`
	Options        []collectorOption `json:"options"`
}

// collectorInfos lists the registry's collectors with their own flags of
// collect and those flags' defaults.
func collectorInfos() []collectorInfo {
	var out []collectorInfo
	for _, s := range collectors.All() {
		if s.Hidden {
			continue
		}
		ci := collectorInfo{Name: s.Name, DefaultEnabled: s.DefaultEnabled, Timeout: s.DefaultTimeout.String(),
			Gathers: s.Description, Needs: s.Requires, Options: []collectorOption{}}
		if s.Flags != nil {
			// Registering binds the flags to the collector's options: in
			// this process, which collects nothing, that merely resets
			// them to their defaults.
			fs := pflag.NewFlagSet(s.Name, pflag.ContinueOnError)
			s.Flags(fs)
			fs.VisitAll(func(f *pflag.Flag) {
				ci.Options = append(ci.Options, collectorOption{Flag: "--" + f.Name, Type: f.Value.Type(), Default: f.DefValue,
					Usage: strings.TrimPrefix(f.Usage, s.Name+": ")})
			})
		}
		out = append(out, ci)
	}
	return out
}

func newCollectorsCommand() *cobra.Command {
	var output string
	var verbose bool
	cmd := &cobra.Command{
		Use:   "collectors",
		Short: "List every collector: what it gathers, its default, deadline and options",
		Long: `Collectors lists what 'nodesnap collect' runs: each collector's name, whether it runs by
default, its own deadline and what it gathers, then, per collector, what it needs from the
node (root, a credential, a socket) and its own options of collect with their defaults (as
'sos report -l' lists plugins and their options). Long texts are cut at the terminal's
width (80 columns off a terminal); -v prints them whole, wrapped; --output json prints the
same for machines.

` + exitHelp(exitLineOK, exitLineUsage),
		Example: `  nodesnap collectors
  nodesnap collectors -o json | jq -r '.[] | select(.default_enabled) | .name'
  sudo nodesnap collect --only host,processes,mounts`,
		Args: argsUsage(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output, "text", "json"); err != nil {
				return err
			}
			infos := collectorInfos()
			w := cmd.OutOrStdout()
			if output == "json" {
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				return enc.Encode(infos)
			}
			return writeCollectors(termsafe.NewWriter(w), textfit.Width(w), infos, verbose || !textfit.IsTerminal(w))
		},
	}
	addOutputFlag(cmd, &output, "text", "json")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "print every text whole, wrapped, instead of cut at the terminal's width (always so off a terminal)")
	return cmd
}

func writeCollectors(out io.Writer, width int, infos []collectorInfo, full bool) error {
	rows := textfit.NewWriter(out, width, full)
	tw := tabwriter.NewWriter(rows, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tDEFAULT\tTIMEOUT\tGATHERS")
	for _, c := range infos {
		on := "off"
		if c.DefaultEnabled {
			on = "on"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Name, on, c.Timeout, c.Gathers)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	text := textfit.NewWriter(out, width, true)
	for _, c := range infos {
		fmt.Fprintf(text, "\n%s\n", c.Name)
		fmt.Fprintln(text, textfit.Fill("needs: "+c.Needs, width, "  ", "         "))
		for _, o := range c.Options {
			def := o.Default
			if def == "" {
				def = `""`
			}
			line := fmt.Sprintf("  %s=%s", o.Flag, def)
			if full {
				fmt.Fprintln(text, line)
				fmt.Fprintln(text, textfit.Fill(o.Usage, width, "      ", "      "))
				continue
			}
			fmt.Fprintln(rows, line+"  "+o.Usage)
		}
	}
	if err := text.Flush(); err != nil {
		return err
	}
	return rows.Flush()
}

// completeCollectorFlags makes shell completion offer what collect's
// flags take: collector names, formats, obfuscation classes, readers.
func completeCollectorFlags(cmd *cobra.Command) {
	var names []string
	for _, s := range collectors.All() {
		if !s.Hidden {
			names = append(names, s.Name+"\t"+s.Description)
		}
	}
	list := func(values []string) cobra.CompletionFunc {
		// A comma-separated list: complete the item after the last comma.
		return func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			head := ""
			if i := strings.LastIndexByte(toComplete, ','); i >= 0 {
				head = toComplete[:i+1]
			}
			var out []cobra.Completion
			for _, v := range values {
				out = append(out, head+v)
			}
			return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
		}
	}
	for flag, fn := range map[string]cobra.CompletionFunc{
		"only":        list(names),
		"skip":        list(names),
		"obfuscate":   list([]string{"ip", "hostname", "mac", "user"}),
		"compression": cobra.FixedCompletions([]string{bundle.Gzip, bundle.Zstd}, cobra.ShellCompDirectiveNoFileComp),
	} {
		if cmd.Flags().Lookup(flag) != nil {
			_ = cmd.RegisterFlagCompletionFunc(flag, fn)
		}
	}
	// Each collector declares its flags' values beside its flags.
	for _, s := range collectors.All() {
		for flag, values := range s.Completions {
			if cmd.Flags().Lookup(flag) != nil {
				_ = cmd.RegisterFlagCompletionFunc(flag, cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp))
			}
		}
	}
}
