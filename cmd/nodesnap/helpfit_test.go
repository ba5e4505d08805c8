package main

import (
	"bytes"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/spf13/cobra"

	"github.com/nodesnap/nodesnap/internal/textfit"
	"github.com/nodesnap/nodesnap/test/skip"
)

// helpCommands is every command a user can ask --help of, as argv.
func helpCommands(c *cobra.Command, path []string) [][]string {
	var out [][]string
	for _, s := range c.Commands() {
		if s.Hidden || s.Name() == "help" || s.Name() == "completion" {
			continue
		}
		p := append(append([]string{}, path...), s.Name())
		out = append(out, p)
		out = append(out, helpCommands(s, p)...)
	}
	return out
}

// helpOnTerminal runs nodesnap args... --help with its stdout on an
// 80-column pseudo-terminal.
func helpOnTerminal(t *testing.T, args []string) string {
	t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		skip.Missing(t, "no pseudo-terminal: %v", err)
	}
	defer ptmx.Close()
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 50, Cols: 80}); err != nil {
		t.Fatal(err)
	}
	cmd := nodesnapCmd(t, []string{"COLUMNS=", "TERM=xterm"}, append(args, "--help")...)
	cmd.Stdout, cmd.Stderr = tty, tty
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	var b bytes.Buffer
	done := make(chan struct{})
	go func() { _, _ = io.Copy(&b, ptmx); close(done) }() // ends with EIO once the child exits
	werr := cmd.Wait()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%v --help: the terminal did not close", args)
	}
	if werr != nil {
		t.Fatalf("%v --help on a terminal: %v\n%s", args, werr, b.String())
	}
	return strings.ReplaceAll(b.String(), "\r\n", "\n")
}

// Every command's help, piped (a file, a ticket) and on an 80-column
// terminal, fits 80 columns: no line is longer, a wrapped line goes on
// under the column it hangs from (never back at the margin), and every
// example still reads as the same commands and comments: a command is
// continued with a backslash, a comment as a comment.
func TestHelpFitsEightyColumns(t *testing.T) {
	cmds := helpCommands(newRootCommand(), nil)
	if len(cmds) < 15 {
		t.Fatalf("only %d commands found", len(cmds))
	}
	root := newRootCommand()
	for _, args := range append([][]string{{}}, cmds...) {
		c, _, err := root.Find(args)
		if err != nil {
			t.Fatal(err)
		}
		r := runNodesnap(t, 30*time.Second, []string{"COLUMNS="}, append(args, "--help")...)
		if r.code != exitOK {
			t.Errorf("%v --help: exit %d\n%s", args, r.code, r.stderr)
			continue
		}
		for where, text := range map[string]string{"piped": r.stdout, "on a terminal": helpOnTerminal(t, args)} {
			for _, p := range helpProblems(text, c.Example) {
				t.Errorf("nodesnap %s --help, %s: %s", strings.Join(args, " "), where, p)
			}
		}
	}
}

// helpProblems checks a rendered help against the rules of
// TestHelpFitsEightyColumns; example is the command's Example as written.
func helpProblems(help, example string) []string {
	var probs []string
	lines := strings.Split(strings.TrimRight(help, "\n"), "\n")
	for _, l := range lines {
		if n := textfit.Len(l); n > 80 {
			probs = append(probs, "a line of "+strconv.Itoa(n)+" columns: "+l)
		}
	}
	// Continuation lines: within a block of lines (no blank between), a
	// line indented deeper than the line before it hangs where that
	// block's text hangs: a previous line's second cell, a backslash's
	// continuation (4 more), or a wrapped line's (2 more).
	// The flags' texts hang from one column across sections.
	var flagLines []string
	for _, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "-") {
			flagLines = append(flagLines, l)
		}
	}
	var block []string
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			block = nil
			continue
		}
		if len(block) > 0 {
			prev := block[len(block)-1]
			in := indentOf(l)
			switch {
			case in == 0 && indentOf(prev) > 0 && !strings.HasSuffix(l, ":"):
				probs = append(probs, "a line back at the margin after an indented one: "+prev+" / "+l)
			case in > indentOf(prev) && !strings.HasPrefix(strings.TrimSpace(l), "-") && !(indentOf(prev) == 0 && strings.HasSuffix(prev, ":")) && !hangsFrom(in, block, flagLines):
				probs = append(probs, "a continuation at column "+strconv.Itoa(in)+" that nothing above hangs from: "+prev+" / "+l)
			}
		}
		block = append(block, l)
	}
	probs = append(probs, exampleProblems(lines, example)...)
	return probs
}

func hangsFrom(col int, block, flagLines []string) bool {
	for _, p := range append(flagLines, block...) {
		if c := secondCell(p); c > 0 && textfit.Len(p[:c]) == col {
			return true
		}
	}
	p := block[len(block)-1]
	return col == indentOf(p)+2 || (strings.HasSuffix(p, " \\") && col == indentOf(p)+4) ||
		(len(block) > 1 && col == indentOf(block[len(block)-2]))
}

// exampleProblems compares the Examples section with example: the same
// commands (backslash continuations joined) and the same comment words.
func exampleProblems(lines []string, example string) []string {
	var rendered []string
	in := false
	for _, l := range lines {
		switch {
		case l == "Examples:":
			in = true
		case in && l != "" && !strings.HasPrefix(l, " "):
			in = false
		case in:
			rendered = append(rendered, l)
		}
	}
	if example == "" {
		return nil
	}
	wantCmds, wantComments := splitExamples(strings.Split(example, "\n"))
	gotCmds, gotComments := splitExamples(rendered)
	var probs []string
	if strings.Join(gotCmds, "\n") != strings.Join(wantCmds, "\n") {
		probs = append(probs, "the examples' commands read differently:\n"+strings.Join(gotCmds, "\n")+"\nwant:\n"+strings.Join(wantCmds, "\n"))
	}
	if strings.Join(gotComments, " ") != strings.Join(wantComments, " ") {
		probs = append(probs, "the examples' comments read differently:\n"+strings.Join(gotComments, " ")+"\nwant:\n"+strings.Join(wantComments, " "))
	}
	for _, l := range rendered {
		if b := strings.TrimSpace(l); strings.HasPrefix(b, "#") && strings.HasSuffix(b, "\\") {
			probs = append(probs, "a comment continued with a backslash: "+l)
		}
	}
	return probs
}

// splitExamples returns the commands (continuations joined, words
// separated by one space) and the comments' words of example lines.
func splitExamples(lines []string) (cmds, comments []string) {
	cur := ""
	for _, l := range lines {
		b := strings.TrimSpace(l)
		if strings.HasPrefix(b, "#") {
			comments = append(comments, strings.Fields(strings.TrimLeft(b, "#"))...)
			continue
		}
		if b == "" {
			continue
		}
		if c, comment, ok := cutComment(b); ok {
			b = c
			comments = append(comments, strings.Fields(comment)...)
		}
		if strings.HasSuffix(b, " \\") {
			cur += strings.TrimSuffix(b, "\\")
			continue
		}
		cmds = append(cmds, strings.Join(strings.Fields(cur+b), " "))
		cur = ""
	}
	return cmds, comments
}

// The checks of TestHelpFitsEightyColumns fail on the help as it was
// wrapped before (nodesnap explain and watch --help, piped).
func TestHelpProblemsSeeOldWrapping(t *testing.T) {
	for _, c := range []struct{ name, help, example, want string }{
		{"paragraph back at the margin", "With --bundle FILE it reads a bundle (one with the cluster collector's view of\n   the node:\ncollected in a pod of the manifests, with --kubeconfig, or on a node with the\n", "",
			"continuation at column 3"},
		{"trigger list misaligned", "Triggers (each with a threshold and a cooldown, set in the --config file):\n  kubelet-unhealthy the kubelet's healthz fails (syncloop, PLEG) for longer than\n     'for'\n  kubelet-down the kubelet does not answer its healthz for longer than 'for'\n", "",
			"continuation at column 5"},
		{"comment split with a backslash", "Examples:\n  nodesnap explain pod/db-0 -n shop                  # collects the \\\n      pod's node through the API\n",
			"  nodesnap explain pod/db-0 -n shop                  # collects the pod's node through the API", "read differently"},
		{"too wide", "  " + strings.Repeat("x", 79) + "\n", "", "a line of 81 columns"},
	} {
		probs := strings.Join(helpProblems(c.help, c.example), "\n")
		if !strings.Contains(probs, c.want) {
			t.Errorf("%s: problems %q, want %q", c.name, probs, c.want)
		}
	}
}
