// Package rebundle re-redacts a finished bundle (nodesnap redact): every
// text file passed through a redactor again, a new manifest, a new
// archive. It sits beside the redaction engine, not in bundle, so that
// readers of bundles (analyze, diff, report) link neither the redactor
// nor its rule tables.
package rebundle

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/redact"
)

// Options control Reredact.
type Options struct {
	// NoBinary drops binary artifacts (which cannot be redacted).
	NoBinary bool
	// Obfuscated names the classes the redactor obfuscates, for the
	// manifest.
	Obfuscated []string
	// Format of the new bundle; empty keeps the input's.
	Format string
}

// Reredact reads the bundle in and writes a new bundle to out with every
// text file passed through red again (more rules, obfuscation), binary
// files kept or dropped, and a manifest whose sizes, digests and
// redaction counts describe the new content. The input is read once and
// never extracted; the new content is staged in a 0700 directory beside
// out and the bundle is written atomically.
func Reredact(ctx context.Context, in, out string, red *redact.Redactor, opts Options) (bundle.Written, *bundle.Manifest, error) {
	var w bundle.Written
	// What validate refuses is refused here too: a bundle whose sizes or
	// digests do not match its manifest would come out with new, matching
	// ones, laundered into one validate calls valid.
	if rep, err := bundle.Validate(ctx, in); err != nil {
		if rep != nil && len(rep.Problems) > 0 {
			return w, nil, fmt.Errorf("%w (%d problem(s), first: %s; nodesnap validate lists them all)", err, len(rep.Problems), rep.Problems[0])
		}
		return w, nil, err
	}
	staging, err := os.MkdirTemp(filepath.Dir(out), fmt.Sprintf("%s%d-staging-", bundle.TempPrefix, os.Getpid()))
	if err != nil {
		return w, nil, wrapSpace(fmt.Errorf("creating a staging directory beside %s: %w", out, err))
	}
	defer os.RemoveAll(staging)
	// One answer per value, as collect gives: what this pass masks in one
	// file is masked in every other (see spreadStaged).
	key, err := redact.NewSpreadKey()
	if err != nil {
		return w, nil, err
	}
	red.RecordMasked(key)

	var m *bundle.Manifest
	byPath := map[string]*bundle.FileEntry{}
	seen := map[string]bool{}
	err = bundle.Walk(ctx, in, bundle.DefaultLimits, func(e bundle.Entry) error {
		if m == nil {
			if e.Name != bundle.ManifestName {
				return bundle.Stop(fmt.Errorf("%w: the first entry is %q, not %s", bundle.ErrUnsafe, e.Name, bundle.ManifestName))
			}
			raw, err := io.ReadAll(io.LimitReader(e.Reader, bundle.MaxManifestBytes+1))
			if err != nil {
				return err
			}
			if m, err = bundle.ParseManifest(raw); err != nil {
				return bundle.Stop(err)
			}
			for i := range m.Files {
				byPath[m.Files[i].Path] = &m.Files[i]
			}
			return nil
		}
		fe := byPath[e.Name]
		if fe == nil {
			return bundle.Stop(fmt.Errorf("%w: %s is in the archive but not in the manifest (run nodesnap validate)", bundle.ErrInvalid, e.Name))
		}
		if seen[e.Name] {
			return bundle.Stop(fmt.Errorf("%w: %s is in the archive twice (run nodesnap validate)", bundle.ErrInvalid, e.Name))
		}
		seen[e.Name] = true
		// The bytes read are checked against the manifest as they are
		// read: the file may have changed since it was validated.
		inHash := sha256.New()
		src := &countReader{r: io.TeeReader(e.Reader, inHash)}
		if fe.Kind == bundle.KindBinary && opts.NoBinary {
			return nil
		}
		dst := filepath.Join(staging, filepath.FromSlash(e.Name))
		if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			return err
		}
		f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		h := sha256.New()
		cw := &countWriter{w: io.MultiWriter(f, h)}
		if fe.Kind == bundle.KindBinary {
			_, err = io.Copy(cw, src)
		} else {
			rw := red.NewWriter(cw)
			_, err = io.Copy(rw, src)
			if cerr := rw.Close(); err == nil {
				err = cerr
			}
			for rule, n := range rw.Counts() {
				if fe.Redactions == nil {
					fe.Redactions = map[string]int{}
				}
				fe.Redactions[rule] += n
			}
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return wrapSpace(fmt.Errorf("re-redacting %s: %w", e.Name, err))
		}
		if src.n != fe.Size || hex.EncodeToString(inHash.Sum(nil)) != fe.SHA256 {
			return bundle.Stop(fmt.Errorf("%w: %s does not match its size or sha256 in the manifest (run nodesnap validate)", bundle.ErrInvalid, e.Name))
		}
		fe.Size, fe.SHA256 = cw.n, hex.EncodeToString(h.Sum(nil))
		return nil
	})
	if err != nil {
		return w, nil, err
	}
	if m == nil {
		return w, nil, fmt.Errorf("%w: the archive is empty", bundle.ErrUnsafe)
	}
	// Keep the files that were present; drop binaries when asked.
	kept := m.Files[:0]
	for _, fe := range m.Files {
		switch {
		case !seen[fe.Path]:
			return w, nil, fmt.Errorf("%w: %s is in the manifest but missing from the archive (run nodesnap validate)", bundle.ErrInvalid, fe.Path)
		case fe.Kind == bundle.KindBinary && opts.NoBinary:
			m.Omitted = append(m.Omitted, bundle.Omitted{Path: fe.Path, Reason: "binary artifact dropped by nodesnap redact --no-binary (" + fe.BinaryReason + ")"})
			for i := range m.Collectors {
				m.Collectors[i].Files = slices.DeleteFunc(m.Collectors[i].Files, func(p string) bool { return p == fe.Path })
			}
		default:
			kept = append(kept, fe)
		}
	}
	m.Files = kept
	if err := spreadStaged(staging, m, redact.Spread{Key: key, Values: red.Masked()}); err != nil {
		return w, nil, err
	}
	m.Redaction.Rules, m.Redaction.Total = map[string]int{}, 0
	for _, fe := range m.Files {
		for rule, n := range fe.Redactions {
			m.Redaction.Rules[rule] += n
			m.Redaction.Total += n
		}
	}
	for _, c := range opts.Obfuscated {
		if !slices.Contains(m.Redaction.Obfuscated, c) {
			m.Redaction.Obfuscated = append(m.Redaction.Obfuscated, c)
		}
	}
	m.Redaction.Rewrites = append(m.Redaction.Rewrites, time.Now().UTC())
	m.Host.Hostname, _ = red.String(m.Host.Hostname)
	for i, a := range m.CommandLine {
		m.CommandLine[i], _ = red.String(a)
	}
	format := opts.Format
	if format == "" {
		format = m.Settings.Compression
	}
	m.Settings.Compression = format
	w, err = bundle.Write(ctx, out, format, m, staging, m.FinishedAt)
	if err != nil {
		return w, nil, err
	}
	return w, m, nil
}

// spreadStaged is collect's last pass over a re-redaction: every value a
// rule masked anywhere in the bundle is masked in every other text file
// too (its base64 and URL-encoded forms as well), counted as
// redact.SpreadRule, and the file's size and digest in the manifest follow.
func spreadStaged(staging string, m *bundle.Manifest, sp redact.Spread) error {
	if len(sp.Values) == 0 {
		return nil
	}
	byPath := map[string]*bundle.FileEntry{}
	var paths []string
	for i := range m.Files {
		fe := &m.Files[i]
		if fe.Kind == bundle.KindBinary {
			continue
		}
		p := filepath.Join(staging, filepath.FromSlash(fe.Path))
		byPath[p] = fe
		paths = append(paths, p)
	}
	masked, err := sp.MaskFiles(paths)
	if err != nil {
		return wrapSpace(err)
	}
	for p, n := range masked {
		fe := byPath[p]
		if fe.Redactions == nil {
			fe.Redactions = map[string]int{}
		}
		fe.Redactions[redact.SpreadRule] += n
		f, err := os.Open(p)
		if err != nil {
			return fmt.Errorf("re-reading %s after the last masking pass: %w", fe.Path, err)
		}
		h := sha256.New()
		size, err := io.Copy(h, f)
		_ = f.Close() // read-only
		if err != nil {
			return fmt.Errorf("re-reading %s after the last masking pass: %w", fe.Path, err)
		}
		fe.Size, fe.SHA256 = size, hex.EncodeToString(h.Sum(nil))
	}
	return nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// wrapSpace marks a full output filesystem as bundle.Write does, so the
// command says "no space" the same way for both.
func wrapSpace(err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return fmt.Errorf("%w: %w", bundle.ErrNoSpace, err)
	}
	return err
}

// countReader counts the bytes read through it.
type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
