package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"
)

// version and buildDate are set at build time (make build):
// -ldflags "-X main.version=v1.2.3 -X main.buildDate=2026-11-21T10:15:00Z".
// The date is the commit's, so that the same commit builds the same bytes.
// revision is the commit (-X main.revision=<sha>, as make stamps it), used
// when the go command's own VCS stamp is missing (-buildvcs=false).
var version, buildDate, revision = "", "", ""

// buildInfo is what a binary can say about where it came from: the
// release version (-ldflags, or the module version of go install), the Go
// toolchain, and the commit and its time that the go command stamps into
// every build from a checkout (go build and go run alike), with
// "+dirty" when the tree had changes.
type buildInfo struct {
	Version   string
	GoVersion string
	Revision  string // "" when the build was not from a checkout
	Modified  bool
	Time      time.Time // the build date (buildDate, else the commit's time); zero when unknown
}

func readBuildInfo() buildInfo {
	b := buildInfo{Version: version, GoVersion: runtime.Version()}
	b.Time, _ = time.Parse(time.RFC3339, buildDate)
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		if revision != "unknown" {
			b.Revision = revision
		}
		if b.Version == "" {
			b.Version = "devel"
		}
		return b
	}
	if b.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		b.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		case "vcs.time":
			if b.Time.IsZero() {
				b.Time, _ = time.Parse(time.RFC3339, s.Value)
			}
		}
	}
	if b.Revision == "" && revision != "unknown" {
		b.Revision = revision
	}
	if b.Version == "" {
		b.Version = "devel"
	}
	return b
}

// toolVersion is the one-word version recorded in manifests and sent as
// the upload's User-Agent.
func toolVersion() string {
	b := readBuildInfo()
	if b.Version == "devel" && b.Revision != "" {
		return "devel-" + b.short()
	}
	return b.Version
}

func (b buildInfo) short() string {
	r := b.Revision
	if len(r) > 12 {
		r = r[:12]
	}
	if b.Modified {
		r += "+dirty"
	}
	return r
}

// String is what `nodesnap version` and `nodesnap --version` print: one
// line, the same for both.
func (b buildInfo) String() string {
	s := "nodesnap " + b.Version + " (" + b.GoVersion
	if b.Revision != "" {
		s += ", commit " + b.short()
	} else {
		s += ", commit unknown"
	}
	if !b.Time.IsZero() {
		s += ", built " + b.Time.UTC().Format(time.RFC3339)
	}
	return s + ", " + runtime.GOOS + "/" + runtime.GOARCH + ")"
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the nodesnap version, its Go version and the commit it was built from",
		Long: `Version prints one line: the release version ("devel" for a build from a checkout),
the Go toolchain, the commit (with +dirty when the checkout had changes, "unknown" for a build
without VCS stamps) and the build date. nodesnap --version prints the same line.`,
		Args: argsUsage(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(cmd.OutOrStdout(), readBuildInfo())
			return nil
		},
	}
}
