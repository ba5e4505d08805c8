package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/nodesnap/nodesnap/internal/textfit"
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
			b.WriteString(r.flag + "\n" + textfit.Fill(r.usage, helpWidth, pad, pad))
			continue
		}
		b.WriteString(textfit.Fill(r.usage, helpWidth, r.flag+strings.Repeat(" ", col+3-len(r.flag)), pad))
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
		b.WriteString("\n" + textfit.Fill(s.Short, helpWidth, first, strings.Repeat(" ", len(first))))
	}
	return b.String()
}

// reflow wraps a command's long text to the help's width: runs of lines
// that start at the margin are paragraphs, filled again (a line ending in
// ":" is a heading only when a list or a blank line follows it); an
// indented line starts an item of a list or table, with the lines below
// it indented deeper, and an item too long is filled again under the
// column its text hangs from (its second cell, else its continuation
// lines' indentation).
func reflow(s string) string {
	lines := strings.Split(s, "\n")
	var out, para []string
	flush := func() {
		if len(para) > 0 {
			out = append(out, textfit.Fill(strings.Join(para, " "), helpWidth, "", ""))
			para = nil
		}
	}
	blank := func(l string) bool { return strings.TrimSpace(l) == "" }
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case blank(l):
			flush()
			out = append(out, "")
		case strings.HasPrefix(l, " "):
			flush()
			item := []string{l}
			for i+1 < len(lines) && !blank(lines[i+1]) && indentOf(lines[i+1]) > indentOf(l) {
				i++
				item = append(item, lines[i])
			}
			out = append(out, fitItem(item)...)
		case strings.HasSuffix(l, ":") && (i+1 == len(lines) || blank(lines[i+1]) || strings.HasPrefix(lines[i+1], " ")):
			flush()
			out = append(out, textfit.Fill(l, helpWidth, "", ""))
		default:
			para = append(para, l)
		}
	}
	flush()
	return strings.Join(out, "\n")
}

func indentOf(l string) int { return len(l) - len(strings.TrimLeft(l, " ")) }

// fitItem fits an item of a list (its first line and its continuation
// lines) to the help's width: as written when every line fits, else its
// text filled again under the column it hangs from.
func fitItem(item []string) []string {
	fits := true
	for _, l := range item {
		fits = fits && textfit.Len(l) <= helpWidth
	}
	if fits {
		return item
	}
	first := strings.TrimRight(item[0], " ")
	hang := -1
	if c := secondCell(first); c > 0 {
		hang = c
	} else if len(item) > 1 {
		hang = indentOf(item[1])
	}
	if hang < 0 || hang > helpWidth/2 {
		var out []string
		for _, l := range item {
			out = append(out, textfit.Hang(l, helpWidth)...)
		}
		return out
	}
	lead, text := first, ""
	if hang < len(first) && secondCell(first) == hang {
		lead, text = first[:hang], first[hang:]
	} else {
		lead, text = first[:indentOf(first)], strings.TrimSpace(first)
		hang = indentOf(first) + 2
	}
	for _, l := range item[1:] {
		text += " " + strings.TrimSpace(l)
	}
	return strings.Split(textfit.Fill(text, helpWidth, lead, strings.Repeat(" ", hang)), "\n")
}

// secondCell is the byte offset of a line's second cell (text after two
// spaces or more past its first word), or 0.
func secondCell(l string) int {
	i := indentOf(l)
	j := strings.Index(l[i:], "  ")
	if j < 0 {
		return 0
	}
	k := i + j
	for k < len(l) && l[k] == ' ' {
		k++
	}
	if k == len(l) {
		return 0
	}
	return k
}

// examples fits a command's examples to the help's width: a long
// command is continued on the next line with a backslash, as a shell
// reads it (never inside quotes); a long comment goes on as a comment,
// and a comment after a command that does not fit beside it goes on the
// line before it: never is a comment continued with a backslash, nor a
// command inside a comment.
func examples(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		indent := l[:len(l)-len(strings.TrimLeft(l, " "))]
		body := strings.TrimLeft(l, " ")
		if strings.HasPrefix(body, "#") {
			out = append(out, textfit.Fill(strings.TrimLeft(body, "# "), helpWidth, indent+"# ", indent+"# "))
			continue
		}
		if cmd, comment, ok := cutComment(body); ok && len(indent)+len(body) > helpWidth {
			out = append(out, textfit.Fill(comment, helpWidth, indent+"# ", indent+"# "))
			body = cmd
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

// cutComment splits a shell command line at its comment: a "#" that
// starts a word outside quotes.
func cutComment(s string) (cmd, comment string, ok bool) {
	var quote byte
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case quote != 0 && c == quote:
			quote = 0
		case quote == 0 && (c == '\'' || c == '"'):
			quote = c
		case quote == 0 && c == '#' && i > 0 && s[i-1] == ' ':
			return strings.TrimRight(s[:i], " "), strings.TrimSpace(strings.TrimLeft(s[i:], "#")), true
		}
	}
	return s, "", false
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
{{flagUsages .InheritedFlags 0 | trimTrailingWhitespaces}}{{end}}{{if .HasAvailableSubCommands}}

Use "{{.CommandPath}} [command] --help" for more information about a command.{{end}}
`

func init() {
	cobra.AddTemplateFunc("flagSections", flagSections)
	cobra.AddTemplateFunc("commandList", commandList)
	cobra.AddTemplateFunc("reflow", reflow)
	cobra.AddTemplateFunc("examples", examples)
	cobra.AddTemplateFunc("flagUsages", flagUsages)
}

// setHelp gives root and every command under it the 80-column help.
func setHelp(root *cobra.Command) {
	root.SetHelpTemplate(helpTemplate)
	root.SetUsageTemplate(usageTemplate)
}
