package diff

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/nodesnap/nodesnap/bundle/naming"
)

// Latest returns the two newest bundles, older first, in dir (a --keep
// directory of cron snapshots), of the host of the newest bundle there.
// Only regular files named as nodesnap names bundles count; the time in
// the name orders them, as retention does (a copy changes mtimes).
func Latest(dir string) (older, newer string, err error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", "", fmt.Errorf("listing the bundles in %s: %w", dir, err)
	}
	type found struct {
		path string
		name naming.Name
	}
	var all []found
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		if n, ok := naming.ParseName(e.Name()); ok {
			all = append(all, found{filepath.Join(dir, e.Name()), n})
		}
	}
	before := func(a, b naming.Name) bool {
		if !a.Time.Equal(b.Time) {
			return a.Time.Before(b.Time)
		}
		return a.Seq < b.Seq
	}
	sort.Slice(all, func(i, j int) bool { return before(all[i].name, all[j].name) })
	if len(all) == 0 {
		return "", "", fmt.Errorf("no bundle (nodesnap-<host>-<time>.tar.gz) in %s", dir)
	}
	host := all[len(all)-1].name.Host
	var same []string
	for _, f := range all {
		if f.name.Host == host {
			same = append(same, f.path)
		}
	}
	if len(same) < 2 {
		return "", "", fmt.Errorf("only one bundle of host %s in %s: nothing to compare it with", host, dir)
	}
	return same[len(same)-2], same[len(same)-1], nil
}
