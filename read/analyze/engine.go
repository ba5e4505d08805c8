package analyze

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"runtime/debug"
	"strings"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/bundle/layout"
)

// Options tune an analysis.
type Options struct {
	// Limits bound what the bundle may claim; zero means
	// bundle.DefaultLimits.
	Limits bundle.Limits
	// Facts fills Report.Facts (nodesnap report draws them); off, the
	// analysis and its JSON are as without it.
	Facts bool
}

// ErrNotBundle is wrapped when the archive is safe but is not a nodesnap
// bundle (no manifest first, or a manifest of another schema version).
var ErrNotBundle = errors.New("not a nodesnap bundle")

// AnalyzeFile analyses the bundle at p: one streaming pass over the
// archive (or the files of an extracted bundle directory), nothing
// written to disk.
func AnalyzeFile(ctx context.Context, p string, opts Options) (*Report, error) {
	if fi, err := os.Stat(p); err == nil && fi.IsDir() {
		rep, err := analyze(ctx, opts, func(lim bundle.Limits, fn func(bundle.Entry) error) error {
			return bundle.Walk(ctx, p, lim, fn)
		})
		if rep != nil {
			rep.Bundle = p
		}
		return rep, err
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("opening the bundle: %w", err)
	}
	defer func() { _ = f.Close() }() // read-only: nothing to lose
	rep, err := Analyze(ctx, f, opts)
	if rep != nil {
		rep.Bundle = p
	}
	return rep, err
}

// Analyze analyses a bundle read from r (a .tar.gz or .tar.zst stream).
// Unsafe archives (entries leaving the bundle, links, absurd sizes) and
// archives that are not nodesnap bundles are refused with an error; a
// collector file that cannot be decoded is reported as an info finding
// and the analysis goes on.
//
// A truncated archive (a half-uploaded attachment) is analysed as far as
// it goes: the findings of everything before the cut, and a
// bundle-truncated finding that says where it ends and what is missing.
// Only an archive cut inside manifest.json is an error.
func Analyze(ctx context.Context, r io.Reader, opts Options) (*Report, error) {
	return analyze(ctx, opts, func(lim bundle.Limits, fn func(bundle.Entry) error) error {
		return bundle.WalkReader(ctx, r, lim, fn)
	})
}

// AnalyzeWalk analyses the entries walk gives (one consumer of
// bundle.Fan, for a reader that also needs the entries for itself); walk
// applies its own limits.
func AnalyzeWalk(ctx context.Context, opts Options, walk bundle.WalkFunc) (*Report, error) {
	return analyze(ctx, opts, func(_ bundle.Limits, fn func(bundle.Entry) error) error { return walk(fn) })
}

func analyze(ctx context.Context, opts Options, walk func(bundle.Limits, func(bundle.Entry) error) error) (*Report, error) {
	lim := opts.Limits
	if lim == (bundle.Limits{}) {
		lim = bundle.DefaultLimits
	}
	st := newState()
	st.wantFacts = opts.Facts
	first := true
	err := walk(lim, func(e bundle.Entry) error {
		if first {
			first = false
			if e.Name != bundle.ManifestName {
				return bundle.Stop(fmt.Errorf("%w: its first entry is %q, not %s", ErrNotBundle, e.Name, bundle.ManifestName))
			}
			raw, err := io.ReadAll(io.LimitReader(e.Reader, bundle.MaxManifestBytes+1))
			if err != nil {
				return err
			}
			if len(raw) > bundle.MaxManifestBytes {
				return bundle.Stop(fmt.Errorf("%w: manifest.json is larger than %d bytes", bundle.ErrUnsafe, bundle.MaxManifestBytes))
			}
			m, err := bundle.ParseManifest(raw)
			if err != nil {
				// Its own words: "manifest schema version 7 is not
				// supported (this nodesnap reads version 1)".
				return bundle.Stop(err)
			}
			st.manifest = m
			st.listed = make(map[string]bool, len(m.Files))
			for _, f := range m.Files {
				st.listed[f.Path] = false
			}
			st.logs.ref = m.StartedAt
			st.filesRead++
			st.bytesRead += int64(len(raw))
			return nil
		}
		st.filesRead++
		st.bytesRead += e.Size
		if _, ok := st.listed[e.Name]; ok {
			st.listed[e.Name] = true
		}
		return st.consume(ctx, e)
	})
	var te *bundle.TruncatedError
	if errors.As(err, &te) && st.manifest != nil {
		st.truncated = te
		err = nil
	}
	if err != nil {
		return nil, err
	}
	if st.manifest == nil {
		return nil, fmt.Errorf("%w: the archive is empty", ErrNotBundle)
	}
	return st.report(), nil
}

// consume feeds one entry to the reader that wants it. A reader's failure
// on bad data becomes "unreadable evidence", never the end of the
// analysis; a panic in a reader (a bug meeting data nobody foresaw) is
// caught and reported the same way.
func (st *state) consume(ctx context.Context, e bundle.Entry) (err error) {
	read := st.readerFor(e.Name)
	if read == nil {
		return nil
	}
	st.present[e.Name] = true
	defer func() {
		if p := recover(); p != nil {
			st.unreadable = append(st.unreadable, unreadable{Path: e.Name, Err: fmt.Sprintf("internal error while reading it: %v\n%s", p, firstLines(string(debug.Stack()), 12))})
			err = nil
		}
	}()
	if rerr := read(e.Name, e.Reader); rerr != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(rerr, bundle.ErrUnsafe) {
			return rerr
		}
		st.unreadable = append(st.unreadable, unreadable{Path: e.Name, Err: describeReadError(rerr)})
	}
	return nil
}

func describeReadError(err error) string {
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return "the file ends in the middle of a JSON value (cut short): " + err.Error()
	}
	return err.Error()
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}

// readerFor picks the reader of a bundle file by its path.
func (st *state) readerFor(name string) func(string, io.Reader) error {
	dir, base := path.Split(name)
	switch {
	case name == layout.TasksPath:
		return st.readTasks
	case name == layout.MountsPath:
		return st.readMounts
	case strings.HasPrefix(name, layout.MountinfoPath) && (strings.HasSuffix(base, layout.MountinfoExt) || base == "mountinfo"):
		return st.readMountinfo
	case strings.HasPrefix(name, layout.MountinfoTablesPrefix) && strings.HasSuffix(name, layout.MountinfoTablesExt) && dir == layout.DirMounts+"/":
		return st.readMountinfoTables
	case name == layout.HoldersPath:
		return st.readHolders
	case name == layout.OpenFilesProcessesPath:
		return st.readOpenFiles
	case name == layout.ProbesPath:
		return st.readProbes
	case name == layout.StorageClientsPath:
		return st.readStorageClients
	case name == layout.ShapePath:
		return st.readShape
	case name == layout.CSIInventoryPath:
		return st.readCSI
	case name == layout.ClusterObjectsPath:
		return st.readClusterObjects
	case name == layout.KubeletHealthzPath:
		return st.readHealthz
	case name == layout.KubeletPodsPath:
		return st.readPods
	case dir == layout.DirKubelet+"/" && strings.HasPrefix(base, layout.KubeletMetricsPrefix) && strings.HasSuffix(base, ".txt"):
		return st.readKubeletMetrics
	case strings.HasPrefix(name, layout.KubeletGoroutinePathPrefix) && strings.HasSuffix(name, ".txt"):
		return st.readKubeletGoroutines
	case strings.HasPrefix(name, layout.DirRuntime+"/") && base == layout.CRIPodsFile:
		return st.readCRIPods
	case strings.HasPrefix(name, layout.DirRuntime+"/") && base == layout.CRIContainersFile:
		return st.readCRIContainers
	case strings.HasPrefix(name, layout.DirRuntime+"/") && strings.HasPrefix(base, layout.RuntimeGoroutinePrefix) && strings.HasSuffix(base, ".txt"):
		return st.readRuntimeGoroutines
	case strings.HasPrefix(dir, layout.CSIPodLogsPath), strings.HasPrefix(dir, layout.CSIHostLogsPath):
		// The CSI drivers' own logs, of their pods' containers or of a
		// driver run as a host process (its log file or journal lines):
		// what the driver answered the kubelet (incident 004's "not
		// published").
		return st.logs.scanLog
	case strings.HasPrefix(dir, layout.DirJournal+"/"):
		// Logs as text; journal JSON exports repeat the text logs and
		// sources.json is the index.
		if strings.HasSuffix(base, ".json") || base == layout.JournalBootsFile || unverifiedLog(name) {
			return nil
		}
		return st.logs.scanLog
	}
	return nil
}
