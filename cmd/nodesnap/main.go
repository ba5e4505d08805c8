// Command nodesnap captures everything needed to diagnose a sick Kubernetes
// node into one redacted bundle, and reads bundles back.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/collectors"
	_ "github.com/nodesnap/nodesnap/collectors/all"
	"github.com/nodesnap/nodesnap/engine/supervisor"
	"github.com/nodesnap/nodesnap/internal/termsafe"
	"github.com/nodesnap/nodesnap/internal/textfit"
)

// Exit statuses, in one place. Every command's help refers to these.
const (
	exitOK           = 0
	exitFatal        = 1
	exitUsage        = 2
	exitPartial      = 3
	exitLocked       = 4
	exitUploadFailed = 5
)

const exitStatusHelp = `Exit status:
  0  success (collect: the bundle is complete)
  1  fatal error: no bundle was written (collect), or the bundle is unreadable
  2  usage error: bad flags or arguments, an unknown command; collect: not
     run as root (see --allow-non-root)
  3  collect: the bundle was written but is partial (a collector timed out
     or failed, --timeout cut collectors, --max-bundle-size left files out,
     the run was interrupted or ran without root); validate, inspect: the
     bundle did not validate (a truncated one included); analyze: a finding
     of severity warning or critical; diff: a new one
  4  collect: another nodesnap run is collecting into the same output
     directory; nothing was collected (try again later, or use another
     --output-dir)
  5  collect, upload: the bundle was written but could not be uploaded; it is
     kept on disk at the printed path (collect prints whether it is partial)`

// exitHelp is the "Exit status:" block of a command's help, listing only
// the statuses it can return, each in its words: "3  a finding ...".
// Lines are wrapped to fit 80 columns.
func exitHelp(lines ...string) string {
	var b strings.Builder
	b.WriteString("Exit status:")
	for _, l := range lines {
		code, text, _ := strings.Cut(l, " ")
		b.WriteString("\n" + textfit.Fill(text, 78, "  "+code+"  ", "     "))
	}
	return b.String()
}

// Exit status lines shared by the commands that read bundles.
const (
	exitLineOK       = "0  success"
	exitLineUsage    = "2  usage error: bad flags or arguments"
	exitLineReadFail = "1  fatal: the bundle could not be read (missing, not a bundle, or unsafe: entries leaving it, links, absurd sizes)"
)

func main() {
	// Hidden internal modes: the same binary re-executed by the isolation
	// layer. They never reach cobra.
	collectors.MaybeRunHidden()
	os.Exit(run(context.Background(), os.Args[1:]))
}

// KubectlPluginName is the binary's name as a kubectl plugin.
const KubectlPluginName = "kubectl-nodesnap"

// partialError reports success with a partial result (exit status 3).
type partialError struct{ msg string }

func (p *partialError) Error() string { return p.msg }

func run(ctx context.Context, args []string) int {
	root := newRootCommand()
	// Installed as kubectl-nodesnap, the binary is a kubectl plugin:
	// `kubectl nodesnap fleet collect ...`; its help says so.
	if filepath.Base(os.Args[0]) == KubectlPluginName {
		// Added to the annotations, not replacing them: the version
		// line lives there too.
		if root.Annotations == nil {
			root.Annotations = map[string]string{}
		}
		root.Annotations[cobra.CommandDisplayNameAnnotation] = "kubectl nodesnap"
	}
	root.SetArgs(args)
	out := &countingWriter{w: os.Stdout}
	root.SetOut(out)
	cmd, err := root.ExecuteContextC(ctx)
	if err != nil && strings.HasPrefix(err.Error(), "unknown command ") {
		// cobra's own words, a usage error like any other (exit 2).
		err = &flagError{fmt.Errorf("%w; 'nodesnap --help' lists the commands", err)}
	}
	code := exitCode(root.ErrOrStderr(), err)
	if err != nil && out.n == 0 && wantsJSON(cmd, args) {
		writeJSONError(out, err, code)
	}
	return code
}

func exitCode(w interface{ Write([]byte) (int, error) }, err error) int {
	if err == nil {
		return exitOK
	}
	var pe *partialError
	if errors.As(err, &pe) {
		if pe.msg != "" {
			fmt.Fprintln(w, "nodesnap: "+termsafe.Text(pe.msg))
		}
		return exitPartial
	}
	// An error may quote a bundle, a node or a peer: shown, never obeyed.
	fmt.Fprintln(w, "nodesnap: "+termsafe.Text(err.Error()))
	var ue *supervisor.UsageError
	var fe *flagError
	var le *lockedError
	var upe *uploadError
	switch {
	case errors.As(err, &ue), errors.As(err, &fe):
		return exitUsage
	case errors.As(err, &le):
		return exitLocked
	case errors.As(err, &upe):
		return exitUploadFailed
	case errors.Is(err, bundle.ErrInvalid):
		return exitPartial
	}
	return exitFatal
}

// flagError wraps cobra's own argument and flag errors.
type flagError struct{ err error }

func (f *flagError) Error() string { return f.err.Error() }
func (f *flagError) Unwrap() error { return f.err }
