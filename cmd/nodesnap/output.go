package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// One rule for every command: -o/--output is the output format (text,
// json, and html where a command writes a page), --output-dir and
// --output-file name where files go. --json is kept as a deprecated
// spelling of --output json where it was documented.

// addOutputFlag registers -o/--output with its values, offered by shell
// completion.
func addOutputFlag(cmd *cobra.Command, p *string, values ...string) {
	cmd.Flags().StringVarP(p, "output", "o", values[0], "output format: "+strings.Join(values, ", "))
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp))
}

// checkOutput refuses an --output value the command does not write.
func checkOutput(v string, values ...string) error {
	if slices.Contains(values, v) {
		return nil
	}
	return &flagError{fmt.Errorf("--output must be %s, not %q", strings.Join(values, " or "), v)}
}

// formatAlias is a deprecated boolean flag (--json, --html) that sets
// --output to its format.
type formatAlias struct {
	p      *string
	format string
	cmd    *cobra.Command
}

func (f *formatAlias) String() string   { return "false" }
func (f *formatAlias) Type() string     { return "bool" }
func (f *formatAlias) IsBoolFlag() bool { return true }
func (f *formatAlias) Set(v string) error {
	switch v {
	case "true":
		*f.p = f.format
		// On stderr: cobra's own deprecation notice goes to stdout,
		// where it would spoil the JSON.
		fmt.Fprintf(f.cmd.ErrOrStderr(), "nodesnap: --%s is deprecated: use --output %s (-o %s)\n", f.format, f.format, f.format)
	case "false":
	default:
		return fmt.Errorf("invalid value %q: true or false", v)
	}
	return nil
}

// addFormatAlias registers --<format> as a deprecated spelling of
// --output <format>: it still works, and says what to use instead. It is
// also there where it never was (inspect --json): that habit of other
// commands and tools gets the same answer rather than an error.
func addFormatAlias(cmd *cobra.Command, p *string, format string) {
	fl := cmd.Flags().VarPF(&formatAlias{p: p, format: format, cmd: cmd}, format, "", "same as --output "+format)
	fl.NoOptDefVal = "true"
	fl.Hidden = true
}

// changed counts the flags among names that were given.
func changed(cmd *cobra.Command, names ...string) int {
	n := 0
	for _, name := range names {
		if cmd.Flags().Changed(name) {
			n++
		}
	}
	return n
}

// fileAlias is -o/--output FILE where it named the output file (report,
// redact) before -o became the format everywhere: it still sets the file,
// with a note on stderr.
type fileAlias struct {
	p    *string
	name string
	cmd  *cobra.Command
}

func (f *fileAlias) String() string { return *f.p }
func (f *fileAlias) Type() string   { return "string" }
func (f *fileAlias) Set(v string) error {
	*f.p = v
	fmt.Fprintf(f.cmd.ErrOrStderr(), "nodesnap: -o FILE is deprecated here: use --%s %s (-o is the output format in every command)\n", f.name, v)
	return nil
}

// addFileAlias registers -o/--output as a hidden, deprecated spelling of
// the file flag name.
func addFileAlias(cmd *cobra.Command, p *string, name string) {
	fl := cmd.Flags().VarPF(&fileAlias{p: p, name: name, cmd: cmd}, "output", "o", "same as --"+name)
	fl.Hidden = true
}

// countingWriter counts what a command printed on stdout, so that a JSON
// error object is printed only where the command printed nothing.
type countingWriter struct {
	w io.Writer
	n int64
}

// Fd is the descriptor of the file written to (os.Stdout), so that a
// terminal is still recognised through the count; ^uintptr(0) otherwise.
func (c *countingWriter) Fd() uintptr {
	if f, ok := c.w.(interface{ Fd() uintptr }); ok {
		return f.Fd()
	}
	return ^uintptr(0)
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// wantsJSON reports whether the command ran (or was asked to run) with
// --output json: from the parsed flag, else from the arguments as given
// (a flag error stops parsing before the value is set).
func wantsJSON(cmd *cobra.Command, args []string) bool {
	if cmd != nil {
		if f := cmd.Flags().Lookup("output"); f != nil && f.Value.String() == "json" {
			return true
		}
	}
	for i, a := range args {
		switch {
		case a == "--":
			return false
		case a == "--output=json", a == "-o=json", a == "-ojson", a == "--json":
			return true
		case (a == "-o" || a == "--output") && i+1 < len(args) && args[i+1] == "json":
			return true
		}
	}
	return false
}

// jsonError is what --output json prints on stdout when a command fails
// without a result of its own.
type jsonError struct {
	Error      string `json:"error"`
	ExitStatus int    `json:"exit_status"`
}

func writeJSONError(w io.Writer, err error, code int) {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(jsonError{Error: err.Error(), ExitStatus: code})
}

// formatAlias is a flag value of its own kind.
var _ pflag.Value = (*formatAlias)(nil)
