package outputdir

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/bundle/naming"
)

// Retain removes the oldest bundles of host in dir so that keep remain,
// current (the bundle just written, a path in dir) always among them. It
// touches nothing but regular files named like bundles of this host and
// owned by this user: other hosts' bundles (a shared directory), other
// files, links and directories are left alone; a bundle's .sha256 sidecar
// goes with it. It returns the paths of the bundles it removed; a file it
// could not remove is reported in err and the rest are still tried.
//
// A partial bundle never costs the newest complete one its place: when
// the keep newest are all partial (a node that has gone on failing), the
// newest complete bundle is kept too, one more than asked. A bundle whose
// manifest cannot be read (encrypted, damaged) is not known to be partial,
// and counts as complete.
func Retain(dir, host string, keep int, current string) (removed []string, err error) {
	if keep <= 0 {
		return nil, nil
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("listing %s for --keep: %w", dir, err)
	}
	want := naming.SafeHost(host)
	curBase := filepath.Base(current)
	var old []naming.Name
	for _, e := range ents {
		name := e.Name()
		if name == curBase {
			continue
		}
		n, ok := naming.ParseName(name)
		if !ok || n.Host != want || !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		if st, ok := info.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Geteuid() {
			continue
		}
		old = append(old, n)
	}
	sort.Slice(old, func(i, j int) bool { return naming.Newer(old[i], old[j]) })
	kept := min(keep-1, len(old)) // current is the newest one kept
	if isPartial(current) {
		complete := -1
		for i := range old {
			if !isPartial(filepath.Join(dir, old[i].String())) {
				complete = i
				break
			}
		}
		if complete >= kept {
			// Keep it: move it up to the last place kept.
			c := old[complete]
			copy(old[kept+1:complete+1], old[kept:complete])
			old[kept] = c
			kept++
		}
	}
	var problems []string
	for _, n := range old[kept:] {
		p := filepath.Join(dir, n.String())
		if rerr := os.Remove(p); rerr != nil {
			problems = append(problems, rerr.Error())
			continue
		}
		removed = append(removed, p)
		if rerr := os.Remove(p + SumSuffix); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			problems = append(problems, rerr.Error())
		}
	}
	if len(problems) > 0 {
		return removed, fmt.Errorf("removing old bundles (--keep %d): %s", keep, strings.Join(problems, "; "))
	}
	return removed, nil
}

// isPartial tells whether the bundle at p says it is partial. It reads
// only the manifest, the archive's first entry.
func isPartial(p string) bool {
	m, _, err := bundle.ReadManifest(context.Background(), p)
	return err == nil && m.Status == bundle.BundlePartial
}
