package bundle

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/nodesnap/nodesnap/bundle/schema"
)

// Report is the outcome of Validate.
type Report struct {
	Manifest *Manifest
	// Checked is how many files had their size and sha256 verified.
	Checked int
	// Problems lists every mismatch found; empty means the bundle is valid.
	Problems []string
	// Truncated says where the archive ends early, when it does: the
	// entries before the cut were checked, the manifest's later files
	// are among Problems as missing.
	Truncated *TruncatedError
}

// ErrInvalid is returned (wrapped) when a bundle fails validation.
var ErrInvalid = errors.New("bundle is not valid")

// Validate checks a bundle completely: the archive is safe to read,
// manifest.json comes first and matches the schema, every file it lists is
// present with the recorded size and sha256, nothing else is present, and
// the manifest agrees with itself. It writes nothing to disk.
func Validate(ctx context.Context, p string) (*Report, error) {
	return ValidateWalk(func(fn func(Entry) error) error { return Walk(ctx, p, DefaultLimits, fn) })
}

// ValidateWalk is Validate over the entries walk gives (one consumer of
// Fan, for a reader that also needs the entries for itself).
func ValidateWalk(walk WalkFunc) (*Report, error) {
	rep := &Report{}
	var byPath map[string]*FileEntry
	seen := map[string]bool{}
	first := true
	err := walk(func(e Entry) error {
		if first {
			first = false
			if e.Name != ManifestName {
				return Stop(fmt.Errorf("%w: the first entry is %q, not %s", ErrInvalid, e.Name, ManifestName))
			}
			raw, err := io.ReadAll(io.LimitReader(e.Reader, MaxManifestBytes+1))
			if err != nil {
				return err
			}
			if len(raw) > MaxManifestBytes {
				return Stop(fmt.Errorf("%w: manifest.json is larger than %d bytes", ErrInvalid, MaxManifestBytes))
			}
			// The version first: a bundle from a newer nodesnap deserves
			// that answer, not a list of schema differences. Then the
			// schema, whose decoded document is garbage before the
			// manifest is decoded: the two never add up in memory.
			if err := CheckSchemaVersion(raw); err != nil {
				return Stop(fmt.Errorf("%w: %w", ErrInvalid, err))
			}
			if err := schema.ValidateManifest(raw); err != nil {
				return Stop(fmt.Errorf("%w: %w", ErrInvalid, err))
			}
			m, err := ParseManifest(raw)
			if err != nil {
				return Stop(fmt.Errorf("%w: %w", ErrInvalid, err))
			}
			rep.Manifest = m
			byPath = make(map[string]*FileEntry, len(m.Files))
			for i := range m.Files {
				fe := &m.Files[i]
				if byPath[fe.Path] != nil {
					rep.Problems = append(rep.Problems, fmt.Sprintf("manifest lists %s twice", fe.Path))
				}
				byPath[fe.Path] = fe
			}
			rep.Problems = append(rep.Problems, consistency(m)...)
			return nil
		}
		fe := byPath[e.Name]
		if fe == nil {
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s is in the archive but not in the manifest", e.Name))
			return nil
		}
		seen[e.Name] = true
		h := sha256.New()
		n, err := io.Copy(h, e.Reader)
		if err != nil {
			return fmt.Errorf("%w: reading %s: %w", ErrUnsafe, e.Name, cleanArchiveErr(err))
		}
		rep.Checked++
		if n != fe.Size {
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s: size %d, manifest says %d", e.Name, n, fe.Size))
		}
		if sum := hex.EncodeToString(h.Sum(nil)); sum != fe.SHA256 {
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s: sha256 %s, manifest says %s", e.Name, sum, fe.SHA256))
		}
		return nil
	})
	var te *TruncatedError
	if errors.As(err, &te) && rep.Manifest != nil {
		rep.Truncated = te
		if te.Entry != "" {
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s is cut short: %d of its %d bytes are in the archive", te.Entry, te.Read, te.Size))
		}
	} else if err != nil {
		return rep, err
	}
	if rep.Manifest == nil {
		return rep, fmt.Errorf("%w: the archive is empty", ErrInvalid)
	}
	for path := range byPath {
		if !seen[path] {
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s is in the manifest but missing from the archive", path))
		}
	}
	sort.Strings(rep.Problems)
	if te != nil {
		return rep, fmt.Errorf("%w: %w", ErrInvalid, te)
	}
	if len(rep.Problems) > 0 {
		return rep, fmt.Errorf("%w: %d problem(s), first: %s", ErrInvalid, len(rep.Problems), rep.Problems[0])
	}
	return rep, nil
}

// consistency checks what the schema cannot: cross references and totals.
func consistency(m *Manifest) []string {
	var probs []string
	names := map[string]bool{}
	owned := map[string]string{}
	for _, c := range m.Collectors {
		if names[c.Name] {
			probs = append(probs, "collector "+c.Name+" is listed twice")
		}
		names[c.Name] = true
		for _, f := range c.Files {
			owned[f] = c.Name
		}
	}
	total := map[string]int{}
	for _, f := range m.Files {
		if !names[f.Collector] {
			probs = append(probs, fmt.Sprintf("%s belongs to collector %q, which the manifest does not list", f.Path, f.Collector))
		}
		if owned[f.Path] != f.Collector {
			probs = append(probs, fmt.Sprintf("%s is not in collector %s's file list", f.Path, f.Collector))
		}
		for r, n := range f.Redactions {
			total[r] += n
		}
	}
	sum := 0
	for r, n := range total {
		sum += n
		if m.Redaction.Rules[r] != n {
			probs = append(probs, fmt.Sprintf("redaction summary for rule %s says %d, files add up to %d", r, m.Redaction.Rules[r], n))
		}
	}
	if sum != m.Redaction.Total {
		probs = append(probs, fmt.Sprintf("redaction total says %d, files add up to %d", m.Redaction.Total, sum))
	}
	return probs
}
