package bundle

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/nodesnap/nodesnap/redact"
)

// RedactOptions control Reredact.
type RedactOptions struct {
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
func Reredact(ctx context.Context, in, out string, red *redact.Redactor, opts RedactOptions) (Written, *Manifest, error) {
	var w Written
	// What validate refuses is refused here too: a bundle whose sizes or
	// digests do not match its manifest would come out with new, matching
	// ones, laundered into one validate calls valid.
	if rep, err := Validate(ctx, in); err != nil {
		if rep != nil && len(rep.Problems) > 0 {
			return w, nil, fmt.Errorf("%w (%d problem(s), first: %s; nodesnap validate lists them all)", err, len(rep.Problems), rep.Problems[0])
		}
		return w, nil, err
	}
	staging, err := os.MkdirTemp(filepath.Dir(out), fmt.Sprintf("%s%d-staging-", TempPrefix, os.Getpid()))
	if err != nil {
		return w, nil, wrapSpace(fmt.Errorf("creating a staging directory beside %s: %w", out, err))
	}
	defer os.RemoveAll(staging)

	var m *Manifest
	byPath := map[string]*FileEntry{}
	seen := map[string]bool{}
	err = Walk(ctx, in, DefaultLimits, func(e Entry) error {
		if m == nil {
			if e.Name != ManifestName {
				return Stop(fmt.Errorf("%w: the first entry is %q, not %s", ErrUnsafe, e.Name, ManifestName))
			}
			raw, err := io.ReadAll(io.LimitReader(e.Reader, MaxManifestBytes+1))
			if err != nil {
				return err
			}
			if m, err = ParseManifest(raw); err != nil {
				return Stop(err)
			}
			for i := range m.Files {
				byPath[m.Files[i].Path] = &m.Files[i]
			}
			return nil
		}
		fe := byPath[e.Name]
		if fe == nil {
			return Stop(fmt.Errorf("%w: %s is in the archive but not in the manifest (run nodesnap validate)", ErrInvalid, e.Name))
		}
		if seen[e.Name] {
			return Stop(fmt.Errorf("%w: %s is in the archive twice (run nodesnap validate)", ErrInvalid, e.Name))
		}
		seen[e.Name] = true
		// The bytes read are checked against the manifest as they are
		// read: the file may have changed since it was validated.
		inHash := sha256.New()
		src := &countReader{r: io.TeeReader(e.Reader, inHash)}
		if fe.Kind == KindBinary && opts.NoBinary {
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
		if fe.Kind == KindBinary {
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
			return Stop(fmt.Errorf("%w: %s does not match its size or sha256 in the manifest (run nodesnap validate)", ErrInvalid, e.Name))
		}
		fe.Size, fe.SHA256 = cw.n, hex.EncodeToString(h.Sum(nil))
		return nil
	})
	if err != nil {
		return w, nil, err
	}
	if m == nil {
		return w, nil, fmt.Errorf("%w: the archive is empty", ErrUnsafe)
	}
	// Keep the files that were present; drop binaries when asked.
	kept := m.Files[:0]
	for _, fe := range m.Files {
		switch {
		case !seen[fe.Path]:
			return w, nil, fmt.Errorf("%w: %s is in the manifest but missing from the archive (run nodesnap validate)", ErrInvalid, fe.Path)
		case fe.Kind == KindBinary && opts.NoBinary:
			m.Omitted = append(m.Omitted, Omitted{Path: fe.Path, Reason: "binary artifact dropped by nodesnap redact --no-binary (" + fe.BinaryReason + ")"})
			for i := range m.Collectors {
				m.Collectors[i].Files = slices.DeleteFunc(m.Collectors[i].Files, func(p string) bool { return p == fe.Path })
			}
		default:
			kept = append(kept, fe)
		}
	}
	m.Files = kept
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
	w, err = Write(ctx, out, format, m, staging, m.FinishedAt)
	if err != nil {
		return w, nil, err
	}
	return w, m, nil
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
