package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Help a person reads in a terminal: 80 columns, flags in sections.

// helpWidth is the width help is written to: what a terminal has at least.
const helpWidth = 80

// sectionKey annotates a flag with the section of --help it belongs to.
const sectionKey = "nodesnap_help_section"

// sectionOrder is the order sections appear in, as they were first named.
var sectionOrder []string

// inSection puts flags, by name, in a section of their command's help.
func inSection(fs *pflag.FlagSet, section string, names ...string) {
	for _, n := range names {
		if fl := fs.Lookup(n); fl != nil {
			_ = fs.SetAnnotation(n, sectionKey, []string{section})
		}
	}
	for _, s := range sectionOrder {
		if s == section {
			return
		}
	}
	sectionOrder = append(sectionOrder, section)
}

// sectionOfNew puts every flag of fs that has no section yet in section:
// after a group of flags was registered.
func sectionOfNew(fs *pflag.FlagSet, section string) {
	var names []string
	fs.VisitAll(func(fl *pflag.Flag) {
		if len(fl.Annotations[sectionKey]) == 0 {
			names = append(names, fl.Name)
		}
	})
	if len(names) > 0 {
		inSection(fs, section, names...)
	}
}

// flagSections renders a command's own flags, section by section, each
// flag's text wrapped to the help's width.
func flagSections(c *cobra.Command) string {
	sets := map[string]*pflag.FlagSet{}
	c.LocalFlags().VisitAll(func(fl *pflag.Flag) {
		if fl.Hidden {
			return
		}
		sec := "Flags"
		if a := fl.Annotations[sectionKey]; len(a) > 0 {
			sec = a[0]
		}
		if sets[sec] == nil {
			sets[sec] = pflag.NewFlagSet(sec, pflag.ContinueOnError)
		}
		sets[sec].AddFlag(fl)
	})
	// One column for every section, so that the sections' texts line up.
	col := 0
	c.LocalFlags().VisitAll(func(fl *pflag.Flag) {
		if n := len(flagName(fl)); !fl.Hidden && n <= helpWidth/3 {
			col = max(col, n)
		}
	})
	var b strings.Builder
	for _, sec := range append(append([]string{}, sectionOrder...), "Flags") {
		fs := sets[sec]
		if fs == nil {
			continue
		}
		delete(sets, sec)
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		fmt.Fprintf(&b, "%s:\n%s", sec, flagUsages(fs, col))
	}
	return b.String()
}

// flagName is a flag as the help's left column shows it: "-q, --quiet",
// "--timeout duration".
func flagName(fl *pflag.Flag) string {
	name := "      --" + fl.Name
	if fl.Shorthand != "" {
		name = "  -" + fl.Shorthand + ", --" + fl.Name
	}
	if varname, _ := pflag.UnquoteUsage(fl); varname != "" {
		name += " " + varname
	}
	return name
}

// flagUsages lists flags as pflag does, the texts wrapped to the help's
// width under the column col (0: the widest flag of fs no wider than a
// third of the width): a longer flag has its text on the lines below.
func flagUsages(fs *pflag.FlagSet, col int) string {
	type row struct{ flag, usage string }
	var rows []row
	widest := 0
	fs.VisitAll(func(fl *pflag.Flag) {
		name := flagName(fl)
		_, usage := pflag.UnquoteUsage(fl)
		if !zeroDefault(fl) {
			if fl.Value.Type() == "string" {
				usage += fmt.Sprintf(" (default %q)", fl.DefValue)
			} else {
				usage += fmt.Sprintf(" (default %s)", fl.DefValue)
			}
		}
		if len(name) <= helpWidth/3 {
			widest = max(widest, len(name))
		}
		rows = append(rows, row{name, usage})
	})
	if col == 0 {
		col = widest
	}
	var b strings.Builder
	pad := strings.Repeat(" ", col+3)
	for i, r := range rows {
		if i > 0 {
			b.WriteByte('\n')
		}
		if len(r.flag) > col {
			b.WriteString(r.flag + "\n" + wrapHelp(r.usage, helpWidth, pad, pad))
			continue
		}
		b.WriteString(wrapHelp(r.usage, helpWidth, r.flag+strings.Repeat(" ", col+3-len(r.flag)), pad))
	}
	return b.String()
}

// zeroDefault reports whether a flag's default goes unsaid, as pflag
// leaves it: false, 0, empty.
func zeroDefault(fl *pflag.Flag) bool {
	switch fl.DefValue {
	case "", "0", "false", "[]", "0s", "<nil>":
		return true
	}
	return false
}

// commandList renders the subcommands, their one-line texts wrapped.
func commandList(c *cobra.Command) string {
	var b strings.Builder
	pad := 0
	for _, s := range c.Commands() {
		if s.IsAvailableCommand() || s.Name() == "help" {
			pad = max(pad, len(s.Name()))
		}
	}
	for _, s := range c.Commands() {
		if !s.IsAvailableCommand() && s.Name() != "help" {
			continue
		}
		first := fmt.Sprintf("  %-*s  ", pad, s.Name())
		b.WriteString("\n" + wrapHelp(s.Short, helpWidth, first, strings.Repeat(" ", len(first))))
	}
	return b.String()
}

// reflow wraps a command's long text to the help's width: runs of lines
// that start at the margin are paragraphs, filled again; indented lines
// (lists, tables, commands) keep their line breaks and are wrapped, when
// too long, under their own indentation.
func reflow(s string) string {
	var out []string
	var para []string
	flush := func() {
		if len(para) > 0 {
			out = append(out, wrapHelp(strings.Join(para, " "), helpWidth, "", ""))
			para = nil
		}
	}
	for _, l := range strings.Split(s, "\n") {
		switch {
		case l == "":
			flush()
			out = append(out, "")
		case strings.HasPrefix(l, " ") || strings.HasSuffix(l, ":"):
			flush()
			indent := l[:len(l)-len(strings.TrimLeft(l, " "))]
			if len(l) <= helpWidth {
				out = append(out, l)
			} else {
				out = append(out, wrapHelp(l, helpWidth, indent, indent+"   "))
			}
		default:
			para = append(para, l)
		}
	}
	flush()
	return strings.Join(out, "\n")
}

// examples fits a command's examples to the help's width: a long
// command is continued on the next line with a backslash, as a shell
// reads it (never inside quotes); a long comment goes on as a comment.
func examples(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		indent := l[:len(l)-len(strings.TrimLeft(l, " "))]
		body := strings.TrimLeft(l, " ")
		if strings.HasPrefix(body, "#") {
			out = append(out, wrapHelp(strings.TrimLeft(body, "# "), helpWidth, indent+"# ", indent+"# "))
			continue
		}
		prefix := indent
		for len(prefix)+len(body) > helpWidth {
			i := shellBreak(body, helpWidth-len(prefix)-2)
			if i <= 0 {
				break
			}
			out = append(out, prefix+body[:i]+" \\")
			body = strings.TrimLeft(body[i:], " ")
			prefix = indent + "    "
		}
		out = append(out, prefix+body)
	}
	return strings.Join(out, "\n")
}

// shellBreak returns the index of the last space in s before max bytes
// that is outside quotes, or -1.
func shellBreak(s string, max int) int {
	best := -1
	var quote byte
	for i := 0; i < len(s) && i <= max; i++ {
		switch c := s[i]; {
		case quote != 0 && c == quote:
			quote = 0
		case quote == 0 && (c == '\'' || c == '"'):
			quote = c
		case quote == 0 && c == ' ':
			best = i
		}
	}
	return best
}

const helpTemplate = `{{with (or .Long .Short)}}{{reflow . | trimTrailingWhitespaces}}

{{end}}{{if or .Runnable .HasSubCommands}}{{.UsageString}}{{end}}`

const usageTemplate = `Usage:{{if .Runnable}}
  {{.UseLine}}{{end}}{{if .HasAvailableSubCommands}}
  {{.CommandPath}} [command]{{end}}{{if .HasExample}}

Examples:
{{examples .Example}}{{end}}{{if .HasAvailableSubCommands}}

Available Commands:{{commandList .}}{{end}}{{if .HasAvailableLocalFlags}}

{{flagSections .}}{{end}}{{if .HasAvailableInheritedFlags}}

Global Flags:
{{.InheritedFlags.FlagUsagesWrapped 80 | trimTrailingWhitespaces}}{{end}}{{if .HasAvailableSubCommands}}

Use "{{.CommandPath}} [command] --help" for more information about a command.{{end}}
`

func init() {
	cobra.AddTemplateFunc("flagSections", flagSections)
	cobra.AddTemplateFunc("commandList", commandList)
	cobra.AddTemplateFunc("reflow", reflow)
	cobra.AddTemplateFunc("examples", examples)
}

// setHelp gives root and every command under it the 80-column help.
func setHelp(root *cobra.Command) {
	root.SetHelpTemplate(helpTemplate)
	root.SetUsageTemplate(usageTemplate)
}
