// Package naming is a bundle's file name, defined once for every writer
// and reader: collect and retention write and prune by it, bundle-cat,
// pod and diff --latest find bundles by it. It is a leaf (standard library
// only) so that readers of bundles need not link the output directory's
// engine to know what a bundle is called.
package naming

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A bundle's file name (collect, retention, bundle-cat, diff --latest):
//
//	nodesnap-<host>-<UTC time>[-<N>][.case-<case id>][.<label>].<tar.gz|tar.zst>[.age]
//
// -N is added when two runs started in the same second; --case-id and
// --label (sos report's habits) go after the time so that the host part
// stays easy to find, and .age is the bundle encrypted with --encrypt-to.
// The host part is greedy so that a host name ending in digits or a dash
// is never mistaken for the time; case id and label hold no dot, so they
// never are either.
//
// Compiled on first use: its bounded repetitions make a large program
// (130 KB) that every process of the binary would build at start.
var bundleName = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^nodesnap-(.+)-([0-9]{8}T[0-9]{6}Z)(?:-([0-9]{1,9}))?(?:\.case-([A-Za-z0-9_-]{1,64}))?(?:\.([A-Za-z0-9_-]{1,64}))?\.(tar\.gz|tar\.zst)(\.age)?$`)
})

// TimeLayout is the UTC time in a bundle's name, and in the directory
// of a fleet collection.
const TimeLayout = "20060102T150405Z"

// Name is what a bundle's file name says about it.
type Name struct {
	Host   string // as in the name: see SafeHost
	Time   time.Time
	Seq    int    // 0, or the -N that made the name unique
	CaseID string // --case-id, or ""
	Label  string // --label, or ""
	// Format is bundle.Gzip or bundle.Zstd ("tar.gz" when empty).
	Format string
	// Encrypted names the .age file --encrypt-to writes.
	Encrypted bool
}

// String is the file name.
func (n Name) String() string {
	var b strings.Builder
	b.WriteString("nodesnap-")
	b.WriteString(SafeHost(n.Host))
	b.WriteString("-")
	b.WriteString(n.Time.UTC().Format(TimeLayout))
	if n.Seq > 0 {
		b.WriteString("-" + strconv.Itoa(n.Seq))
	}
	if n.CaseID != "" {
		b.WriteString(".case-" + n.CaseID)
	}
	if n.Label != "" {
		b.WriteString("." + n.Label)
	}
	f := n.Format
	if f == "" {
		f = "tar.gz"
	}
	b.WriteString("." + f)
	if n.Encrypted {
		b.WriteString(".age")
	}
	return b.String()
}

// ParseName parses a bundle file name (no directory). ok is false for
// any other name (a .sha256 sidecar, a temporary file, a mapping).
func ParseName(name string) (n Name, ok bool) {
	m := bundleName().FindStringSubmatch(name)
	if m == nil {
		return n, false
	}
	t, err := time.Parse(TimeLayout, m[2])
	if err != nil {
		return n, false
	}
	n = Name{Host: m[1], Time: t, CaseID: m[4], Label: m[5], Format: m[6], Encrypted: m[7] != ""}
	if m[3] != "" {
		n.Seq, _ = strconv.Atoi(m[3])
	}
	if n.Seq == 0 && m[3] != "" || SafeHost(n.Host) != n.Host || strings.HasPrefix(n.Label, "case-") {
		// -0, hosts nodesnap would have written differently and
		// labels CheckTag refuses are not names it gives.
		return Name{}, false
	}
	return n, true
}

// SafeHost is host as it appears in bundle names: characters unsafe in a
// file name become '_', and an empty host is "unknown".
func SafeHost(host string) string {
	host = strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '.', r == '_':
			return r
		}
		return '_'
	}, host)
	if host == "" {
		host = "unknown"
	}
	return host
}

// CheckTag checks the value of --case-id or --label (flag names which)
// for the bundle's name: 1 to 64 letters, digits, '-' or '_', and a label
// must not start with "case-" (it would read as a case id). It is a
// usage error for the user to fix, said as such.
func CheckTag(flag, v string) error {
	if v == "" {
		return nil
	}
	if len(v) > 64 {
		return fmt.Errorf("--%s is %d characters long; at most 64 go into the bundle's name", flag, len(v))
	}
	for _, r := range v {
		if !isTagRune(r) {
			return fmt.Errorf("--%s %q: only letters, digits, '-' and '_' may go into the bundle's name, not %q", flag, v, r)
		}
	}
	if flag == "label" && strings.HasPrefix(v, "case-") {
		return fmt.Errorf("--label %q: a label must not start with \"case-\" (that part of the name is --case-id's)", v)
	}
	return nil
}

// Newer orders names newest first: by the time in the name (the run's
// start, not the file's mtime, which a copy or a restore changes), then
// by -N; ties go by the file name.
func Newer(a, b Name) bool {
	if !a.Time.Equal(b.Time) {
		return a.Time.After(b.Time)
	}
	if a.Seq != b.Seq {
		return a.Seq > b.Seq
	}
	return a.String() > b.String()
}

// SortNewest sorts file names of bundles newest first (see Newer). Every
// name must parse.
func SortNewest(names []string) {
	sort.SliceStable(names, func(i, j int) bool {
		a, _ := ParseName(names[i])
		b, _ := ParseName(names[j])
		return Newer(a, b)
	})
}

func isTagRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_'
}
