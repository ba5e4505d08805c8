package bundle

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

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
//
// When the bundle is a file with its checksum file beside it
// (<bundle>.sha256, as collect writes it), the file's sha256 must match
// it too: that covers every byte, also the few the compressed stream does
// not (gzip's header: its time stamp, flags byte and OS byte).
func Validate(ctx context.Context, p string) (*Report, error) {
	fi, err := os.Stat(p)
	if err != nil || !fi.Mode().IsRegular() {
		return ValidateWalk(func(fn func(Entry) error) error { return Walk(ctx, p, DefaultLimits, fn) })
	}
	want, sumProblem := readSumFile(p + SumSuffix)
	if want == "" && sumProblem == "" {
		return ValidateWalk(func(fn func(Entry) error) error { return Walk(ctx, p, DefaultLimits, fn) })
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("opening the bundle: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	rep, err := ValidateWalk(func(fn func(Entry) error) error {
		return WalkReader(ctx, hashingFile{File: f, h: h}, DefaultLimits, fn)
	})
	if rep == nil || ctx.Err() != nil {
		return rep, err
	}
	if sumProblem == "" {
		// The rest of the file, after where the walk stopped: the sum is
		// of the whole file whatever the walk made of it.
		if _, cerr := io.Copy(h, f); cerr != nil {
			sumProblem = fmt.Sprintf("reading the bundle to check it against %s: %v", filepath.Base(p)+SumSuffix, cerr)
		} else if got := hex.EncodeToString(h.Sum(nil)); got != want {
			sumProblem = fmt.Sprintf("the bundle's sha256 is %s, %s beside it says %s: the file was damaged or changed after it was written", got, filepath.Base(p)+SumSuffix, want)
		}
	}
	if sumProblem == "" {
		return rep, err
	}
	rep.Problems = append(rep.Problems, sumProblem)
	sort.Strings(rep.Problems)
	if err == nil || errors.Is(err, ErrEncrypted) {
		// An encrypted bundle cannot be read here, but its checksum
		// file can still say it is not what was written.
		err = fmt.Errorf("%w: %d problem(s), first: %s", ErrInvalid, len(rep.Problems), rep.Problems[0])
	}
	return rep, err
}

// SumSuffix names a bundle's checksum file, written beside it by collect:
// <bundle>.sha256, one line in the format of sha256sum.
const SumSuffix = ".sha256"

// readSumFile reads the sha256 a checksum file gives: "" and "" when there
// is none; "" and a problem when it is there but cannot be believed.
func readSumFile(p string) (sum, problem string) {
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return "", ""
	}
	name := filepath.Base(p)
	if err != nil {
		return "", fmt.Sprintf("%s: %v", name, err)
	}
	if !fi.Mode().IsRegular() || fi.Size() > 4096 {
		return "", fmt.Sprintf("%s is not a checksum file (a regular file of one sha256sum line)", name)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return "", fmt.Sprintf("%s: %v", name, err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	digits, _, _ := strings.Cut(line, " ")
	digits = strings.ToLower(digits)
	if len(digits) != sha256.Size*2 || strings.Trim(digits, "0123456789abcdef") != "" {
		return "", fmt.Sprintf("%s does not hold a sha256 (a sha256sum line): it was damaged", name)
	}
	return digits, ""
}

// hashingFile is the bundle's file, hashing what is read from it; it keeps
// the file's Stat, which WalkReader uses to bound the manifest.
type hashingFile struct {
	*os.File
	h hash.Hash
}

func (f hashingFile) Read(p []byte) (int, error) {
	n, err := f.File.Read(p)
	f.h.Write(p[:n])
	return n, err
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
			// that answer, not a list of schema differences; and the
			// manifest's own checksum, which names a damaged byte better
			// than whatever it broke in the schema. Then the
			// schema, whose decoded document is garbage before the
			// manifest is decoded: the two never add up in memory.
			if err := CheckManifest(raw); err != nil {
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
