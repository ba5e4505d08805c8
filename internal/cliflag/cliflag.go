// Package cliflag holds what nodesnap's command-line flags share: the one
// byte-size flag value (ByteSize, ParseBytes) every size flag uses, and
// the marks a flag's declarer puts on a credential (MarkSecret) or a URL
// that may carry one (MarkURL), which decide what the manifest's record of
// the command line hides (RecordArgs).
package cliflag

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

// ByteSize is a flag value accepting 1048576, 512KiB, 64MiB, 1GiB (and
// the decimal KB, MB, GB, TB; K, M, G are binary). Case does not matter.
type ByteSize int64

func (b *ByteSize) String() string { return FormatBytes(int64(*b)) }

// Type is how pflag names the value in help.
func (b *ByteSize) Type() string { return "size" }

// Set parses s (ParseBytes).
func (b *ByteSize) Set(s string) error {
	n, err := ParseBytes(s)
	if err != nil {
		return err
	}
	*b = ByteSize(n)
	return nil
}

var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"KIB", 1 << 10}, {"MIB", 1 << 20}, {"GIB", 1 << 30}, {"TIB", 1 << 40},
	{"KB", 1000}, {"MB", 1000 * 1000}, {"GB", 1000 * 1000 * 1000}, {"TB", 1000 * 1000 * 1000 * 1000},
	{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40}, {"B", 1},
}

// ParseBytes parses a size: a whole number of bytes, optionally with a
// unit (see ByteSize). It refuses negatives, fractions and sizes over
// 2^62 bytes, with a message giving examples.
func ParseBytes(s string) (int64, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	mult := int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || t == "" || t[0] == '+' || t[0] == '-' {
		return 0, fmt.Errorf("%q is not a size (examples: 1048576, 512KiB, 64MiB, 1GiB)", s)
	}
	if n > 0 && mult > (1<<62)/n {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return n * mult, nil
}

// FormatBytes is n the way ByteSize reads it back: the largest binary
// unit that divides it exactly (64MiB), else bytes.
func FormatBytes(n int64) string {
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.mult && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

// The annotations MarkSecret and MarkURL set.
const (
	annotationSecret = "nodesnap_secret"
	annotationURL    = "nodesnap_url"
)

// MarkSecret marks the flag name of fs as holding a credential: its value
// is recorded as [REDACTED]. The code that declares a flag marks it, so
// that the list of secrets cannot drift from the flags that exist.
func MarkSecret(fs *pflag.FlagSet, name string) {
	if err := fs.SetAnnotation(name, annotationSecret, []string{"true"}); err != nil {
		panic("cliflag.MarkSecret: " + err.Error()) // a programming error: no such flag
	}
}

// MarkURL marks the flag name of fs as holding a URL that may carry a
// credential in its query (a pre-signed URL's signature) or user info:
// only its scheme, host and path are recorded.
func MarkURL(fs *pflag.FlagSet, name string) {
	if err := fs.SetAnnotation(name, annotationURL, []string{"true"}); err != nil {
		panic("cliflag.MarkURL: " + err.Error())
	}
}

// RecordArgs is argv as the manifest may record it: the values of flags
// marked secret replaced by [REDACTED], and of flags marked URL cut to
// scheme, host and path (SafeURL), in both --flag value and --flag=value
// forms (and -x value for a flag's shorthand).
func RecordArgs(fs *pflag.FlagSet, argv []string) []string {
	kind := map[string]string{}
	fs.VisitAll(func(f *pflag.Flag) {
		k := ""
		if _, ok := f.Annotations[annotationSecret]; ok {
			k = "secret"
		} else if _, ok := f.Annotations[annotationURL]; ok {
			k = "url"
		}
		if k != "" {
			kind["--"+f.Name] = k
			if f.Shorthand != "" {
				kind["-"+f.Shorthand] = k
			}
		}
	})
	hide := func(k, v string) string {
		if k == "url" {
			return recordableURL(v)
		}
		return "[REDACTED]"
	}
	out := make([]string, 0, len(argv))
	next := ""
	for _, a := range argv {
		if next != "" {
			out = append(out, hide(next, a))
			next = ""
			continue
		}
		if k, ok := kind[a]; ok {
			next = k
			out = append(out, a)
			continue
		}
		if name, v, ok := strings.Cut(a, "="); ok {
			if k, ok := kind[name]; ok {
				out = append(out, name+"="+hide(k, v))
				continue
			}
		}
		out = append(out, a)
	}
	return out
}

// HiddenValues are the values RecordArgs hides in argv: the values of
// flags marked secret, and what URLSecrets finds in those marked URL. The
// collection masks them wherever they appear (nodesnap's own command line
// in the process list, an error quoting the URL).
func HiddenValues(fs *pflag.FlagSet, argv []string) []string {
	rec := RecordArgs(fs, argv)
	var out []string
	for i, a := range argv {
		if i >= len(rec) || rec[i] == a {
			continue
		}
		v := a
		if name, val, ok := strings.Cut(a, "="); ok && strings.HasPrefix(name, "-") && strings.HasPrefix(rec[i], name+"=") {
			v = val
		}
		if strings.Contains(rec[i], "://") || strings.Contains(v, "://") {
			out = append(out, URLSecrets(v)...)
			continue
		}
		out = append(out, v)
	}
	return out
}

// URLSecrets are the parts of a URL that may be credentials: the user
// info's password, the whole query and fragment, and each query value that
// a credential-named parameter holds (X-Amz-Signature, X-Amz-Security-Token,
// X-Goog-Signature, sig, token, ...) or that is long enough to be one.
func URLSecrets(s string) []string {
	u, err := url.Parse(s)
	if err != nil {
		return []string{s}
	}
	var out []string
	if u.User != nil {
		if p, ok := u.User.Password(); ok {
			out = append(out, p, url.QueryEscape(p))
		}
	}
	if u.RawQuery != "" {
		out = append(out, u.RawQuery)
		for _, kv := range strings.Split(u.RawQuery, "&") {
			k, v, _ := strings.Cut(kv, "=")
			lk := strings.ToLower(k)
			named := false
			for _, w := range []string{"sig", "token", "credential", "key", "secret", "pass", "auth", "code"} {
				named = named || strings.Contains(lk, w)
			}
			if named || len(v) >= 32 {
				out = append(out, v)
				if d, err := url.QueryUnescape(v); err == nil && d != v {
					out = append(out, d)
				}
			}
		}
	}
	if u.Fragment != "" {
		out = append(out, u.RawFragment, u.Fragment)
	}
	return out
}

func recordableURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return "[REDACTED]"
	}
	return SafeURL(u)
}

// SafeURL is u without what may be a credential: user info, query and
// fragment (a query is shown as "?…" so that its presence is known).
func SafeURL(u *url.URL) string {
	c := *u
	c.User = nil
	c.Fragment, c.RawFragment = "", ""
	q := c.RawQuery != ""
	c.RawQuery, c.ForceQuery = "", false
	s := c.String()
	if q {
		s += "?…"
	}
	return s
}
