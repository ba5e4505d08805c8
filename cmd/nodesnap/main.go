// Command nodesnap captures everything needed to diagnose a sick Kubernetes
// node into one redacted bundle, and reads bundles back.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/supervisor"
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
  2  usage error: bad flags or arguments; collect: not run as root (see
     --allow-non-root)
  3  collect: the bundle was written but is partial (a collector timed out
     or failed, --timeout cut collectors, --max-bundle-size left files out,
     the run was interrupted or ran without root); validate: the bundle
     did not validate; analyze: a finding of severity warning or critical
  4  collect: another nodesnap run is collecting into the same output
     directory; nothing was collected (try again later, or use another -o)
  5  collect, upload: the bundle was written but could not be uploaded; it is
     kept on disk at the printed path (collect prints whether it is partial)`

// version is set at build time with -ldflags "-X main.version=...".
var version = ""

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
		root.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl nodesnap"}
	}
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	return exitCode(root.ErrOrStderr(), err)
}

func exitCode(w interface{ Write([]byte) (int, error) }, err error) int {
	if err == nil {
		return exitOK
	}
	var pe *partialError
	if errors.As(err, &pe) {
		if pe.msg != "" {
			fmt.Fprintln(w, "nodesnap: "+pe.msg)
		}
		return exitPartial
	}
	fmt.Fprintln(w, "nodesnap: "+err.Error())
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
