package nodeconfig

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/collectors/hostfs"
)

// A --config-file is a file, a directory (its files, and its
// subdirectories' files) or a glob, as sos' copy specs are; each file it
// yields is recorded in files.json on its own. Every file keeps its first
// MaxConfigFileBytes (a configuration file larger than that is not one;
// the run says so and is partial); a directory or glob yields at most
// MaxSpecFiles files and MaxSpecBytes bytes, and says what it left out.
const (
	MaxConfigFileBytes       = 4 << 20
	MaxSpecFiles             = 256
	MaxSpecBytes       int64 = 64 << 20
	maxSpecDirs              = 64
	maxSpecDepth             = 8
)

// specOf is the directory or glob --config-file a path came from.
type specOf struct {
	spec  string
	bytes int64
	cut   string // why the spec's files stop here, when they do
}

// hasMeta reports whether p is a glob pattern.
func hasMeta(p string) bool { return strings.ContainsAny(p, "*?[") }

// isDirErr reports a read of a directory.
func isDirErr(err error) bool { return errors.Is(err, unix.EISDIR) }

// expandSpec returns the files of a directory or glob --config-file, in
// name order, at most MaxSpecFiles; cut says what was left out.
func expandSpec(ctx context.Context, env *collectors.Env, spec string) (files []string, cut string, err error) {
	var dirs []string
	if hasMeta(spec) {
		matches, more, err := env.Host().Glob(ctx, hostfs.Path(spec), MaxSpecFiles)
		if err != nil {
			return nil, "", fmt.Errorf("expanding %s: %w", spec, err)
		}
		if more {
			cut = fmt.Sprintf("it matches more than %d paths; the first %d are kept", MaxSpecFiles, MaxSpecFiles)
		}
		for _, m := range matches {
			files = append(files, string(m))
		}
		return files, cut, nil
	}
	dirs = append(dirs, spec)
	depth := map[string]int{spec: 0}
	for listed := 0; len(dirs) > 0; listed++ {
		d := dirs[0]
		dirs = dirs[1:]
		if listed == maxSpecDirs {
			cut = fmt.Sprintf("it holds more than %d directories; %s and the ones after it are not entered", maxSpecDirs, d)
			break
		}
		l, err := env.Host().List(ctx, hostfs.Path(d), MaxSpecFiles+1)
		if err != nil {
			if d == spec {
				return nil, "", fmt.Errorf("listing %s: %w", spec, err)
			}
			env.Notef("--config-file %s: listing %s: %v", spec, d, err)
			continue
		}
		for _, e := range l.Entries {
			p := path.Join(d, e.Name)
			switch {
			case e.IsDir() && depth[d] < maxSpecDepth:
				depth[p] = depth[d] + 1
				dirs = append(dirs, p)
			case e.IsDir():
				if cut == "" {
					cut = fmt.Sprintf("%s is deeper than %d directories; not entered", p, maxSpecDepth)
				}
			case e.MaybeFile() || e.Type == unix.DT_LNK:
				if len(files) == MaxSpecFiles {
					return files, fmt.Sprintf("it holds more than %d files; the first %d are kept", MaxSpecFiles, MaxSpecFiles), nil
				}
				files = append(files, p)
			}
		}
	}
	return files, cut, nil
}

// expandInto expands the directory or glob spec and returns its files not
// seen yet, each recorded in specs as coming from spec.
func expandInto(ctx context.Context, env *collectors.Env, spec string, specs map[string]*specOf, seen map[string]bool, list *[]*specOf) []string {
	files, cut, err := expandSpec(ctx, env, spec)
	if err != nil {
		env.Partialf("--config-file %s: %v", spec, err)
		return nil
	}
	sp := &specOf{spec: spec, cut: cut}
	*list = append(*list, sp)
	if len(files) == 0 {
		env.Notef("--config-file %s: no file in it", spec)
	}
	var out []string
	for _, f := range files {
		if !seen[f] {
			seen[f] = true
			specs[f] = sp
			out = append(out, f)
		}
	}
	return out
}
