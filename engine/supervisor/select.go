package supervisor

import (
	"fmt"
	"sort"
	"strings"

	"github.com/nodesnap/nodesnap/collectors"
)

// UsageError is a mistake in what the user asked for (exit status 2).
type UsageError struct{ Msg string }

func (u *UsageError) Error() string { return u.Msg }

// Select returns the collectors a run uses: the default set, or exactly
// only when given, less skip. Unknown names are a usage error that lists
// the known ones.
func Select(only, skip []string) ([]*collectors.Spec, error) {
	known := map[string]*collectors.Spec{}
	var names []string
	for _, s := range collectors.All() {
		known[s.Name] = s
		if !s.Hidden {
			names = append(names, s.Name)
		}
	}
	check := func(flag string, list []string) error {
		for _, n := range list {
			if known[n] == nil {
				return &UsageError{Msg: fmt.Sprintf("%s: unknown collector %q (known: %s)", flag, n, strings.Join(names, ", "))}
			}
		}
		return nil
	}
	if err := check("--only", only); err != nil {
		return nil, err
	}
	if err := check("--skip", skip); err != nil {
		return nil, err
	}
	skipped := map[string]bool{}
	for _, n := range skip {
		skipped[n] = true
	}
	var out []*collectors.Spec
	if len(only) > 0 {
		seen := map[string]bool{}
		for _, n := range only {
			if !skipped[n] && !seen[n] {
				seen[n] = true
				out = append(out, known[n])
			}
		}
	} else {
		for _, s := range collectors.All() {
			if s.DefaultEnabled && !skipped[s.Name] {
				out = append(out, s)
			}
		}
	}
	if len(out) == 0 {
		return nil, &UsageError{Msg: "no collectors selected (check --only and --skip)"}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
