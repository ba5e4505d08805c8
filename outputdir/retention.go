package outputdir

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nodesnap/nodesnap/bundle"
)

// bundleName matches the names the supervisor gives bundles:
// nodesnap-<host>-<UTC time>[-N].tar.{gz,zst}, -N being added when two
// runs started in the same second. The host part is greedy so that a host
// name ending in digits or a dash is never mistaken for the time.
var bundleName = regexp.MustCompile(`^nodesnap-(.+)-([0-9]{8}T[0-9]{6}Z)(?:-([0-9]{1,9}))?\.(tar\.gz|tar\.zst)$`)

// Name is what a bundle's file name says about it.
type Name struct {
	Host string
	Time time.Time
	Seq  int // 0, or the -N that made the name unique
}

// ParseName parses a bundle file name (no directory). ok is false for
// any other name.
func ParseName(name string) (n Name, ok bool) {
	m := bundleName.FindStringSubmatch(name)
	if m == nil {
		return n, false
	}
	t, err := time.Parse("20060102T150405Z", m[2])
	if err != nil {
		return n, false
	}
	n = Name{Host: m[1], Time: t}
	if m[3] != "" {
		n.Seq, _ = strconv.Atoi(m[3])
	}
	return n, true
}

// hostInName is host as it appears in bundle names (the supervisor
// replaces characters unsafe in a file name).
func hostInName(host string) string {
	const stamp = "-19700101T000000Z." + bundle.Gzip
	n := bundle.DefaultName(host, time.Unix(0, 0), bundle.Gzip)
	return strings.TrimSuffix(strings.TrimPrefix(n, "nodesnap-"), stamp)
}

// Retain removes the oldest bundles of host in dir so that keep remain,
// current (the bundle just written, a path in dir) always among them. It is
// called only once current is complete. It touches nothing but regular
// files named like bundles of this host and owned by this user: other
// hosts' bundles (a shared directory), other files, links and directories
// are left alone. It returns the paths it removed; a file it could not
// remove is reported in err and the rest are still tried.
func Retain(dir, host string, keep int, current string) (removed []string, err error) {
	if keep <= 0 {
		return nil, nil
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("listing %s for --keep: %w", dir, err)
	}
	want := hostInName(host)
	curBase := filepath.Base(current)
	type cand struct {
		name string
		n    Name
	}
	var old []cand
	for _, e := range ents {
		name := e.Name()
		if name == curBase {
			continue
		}
		n, ok := ParseName(name)
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
		old = append(old, cand{name, n})
	}
	// Newest first by the time in the name (the run's start), not by
	// mtime, which a copy or a restore changes.
	sort.Slice(old, func(i, j int) bool {
		a, b := old[i].n, old[j].n
		if !a.Time.Equal(b.Time) {
			return a.Time.After(b.Time)
		}
		if a.Seq != b.Seq {
			return a.Seq > b.Seq
		}
		return old[i].name > old[j].name
	})
	var problems []string
	for i, c := range old {
		if i < keep-1 { // current is the newest one kept
			continue
		}
		p := filepath.Join(dir, c.name)
		if rerr := os.Remove(p); rerr != nil {
			problems = append(problems, rerr.Error())
			continue
		}
		removed = append(removed, p)
	}
	if len(problems) > 0 {
		return removed, fmt.Errorf("removing old bundles (--keep %d): %s", keep, strings.Join(problems, "; "))
	}
	return removed, nil
}
