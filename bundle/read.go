package bundle

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
)

// Limits protect readers of untrusted bundles.
type Limits struct {
	// MaxEntryBytes refuses an entry that claims, or turns out, to be
	// larger.
	MaxEntryBytes int64
	// MaxTotalBytes bounds everything decompressed (a decompression bomb
	// stops here).
	MaxTotalBytes int64
	// MaxEntries bounds the number of entries.
	MaxEntries int
}

// DefaultLimits suit any bundle nodesnap writes with its default caps.
var DefaultLimits = Limits{MaxEntryBytes: 2 << 30, MaxTotalBytes: 8 << 30, MaxEntries: 2_000_000}

// ErrUnsafe is wrapped by every refusal of a hostile or malformed archive.
var ErrUnsafe = errors.New("unsafe or malformed bundle")

// Entry is one file as it is read from a bundle.
type Entry struct {
	Name string
	Size int64
	// Reader yields the entry's bytes; valid only inside the callback.
	Reader io.Reader
}

// Walk reads a bundle from path, calling fn for each entry in order. It
// never writes to disk. It refuses (with an error wrapping ErrUnsafe)
// entries that are not regular files, names that are absolute, contain
// "..", or repeat, and sizes beyond the limits. An archive that ends early
// (a half-uploaded attachment) ends the walk with a *TruncatedError after
// every entry before the cut was given to fn.
//
// p may also be a directory holding an extracted bundle (walkDir): the
// same entries, the same refusals.
func Walk(ctx context.Context, p string, lim Limits, fn func(Entry) error) error {
	if fi, err := os.Stat(p); err == nil && fi.IsDir() {
		return walkDir(ctx, p, lim, fn)
	}
	f, err := os.Open(p)
	if err != nil {
		return fmt.Errorf("opening the bundle: %w", err)
	}
	defer f.Close()
	return WalkReader(ctx, f, lim, fn)
}

// WalkReader is Walk over a stream. When r is a regular file (an
// *os.File, as Walk and analyze give it), manifest.json may not claim more
// than ManifestBudget of the file's size: see there.
func WalkReader(ctx context.Context, r io.Reader, lim Limits, fn func(Entry) error) error {
	manifestMax := int64(MaxManifestBytes)
	var onDisk int64 = -1
	if f, ok := r.(interface{ Stat() (fs.FileInfo, error) }); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
			onDisk = fi.Size()
			manifestMax = min(manifestMax, ManifestBudget(onDisk))
		}
	}
	br := bufio.NewReaderSize(r, 64<<10)
	magic, _ := br.Peek(len(ageArmor))
	if bytes.HasPrefix(magic, []byte(ageMagic)) || bytes.HasPrefix(magic, []byte(ageArmor)) {
		return ErrEncrypted
	}
	dec, err := newDecompressor(magic, br)
	if err != nil {
		if errors.Is(err, ErrUnsafe) {
			return err
		}
		return fmt.Errorf("%w: %w", ErrUnsafe, cleanArchiveErr(err))
	}
	defer dec.Close()
	tr := tar.NewReader(dec)
	seen := newNameSet()
	cr := &countReader{}
	var total int64
	count := 0
	last := "" // the last entry read whole
	// top is the directory every entry sits in ("name/"), known from the
	// first entry, manifest.json; "" for bundles written before there was
	// one, whose entries sit at the root.
	top := ""
	entry := func(hdr *tar.Header) error {
		name, err := safeName(hdr.Name)
		if err != nil {
			return err
		}
		if count == 0 {
			if dir, base := path.Split(name); base == ManifestName && dir != "" && strings.Count(dir, "/") == 1 {
				top = dir
			}
		}
		if top != "" {
			rest, ok := strings.CutPrefix(name, top)
			if !ok {
				return fmt.Errorf("%w: entry %q is outside the bundle's directory %s", ErrUnsafe, name, top)
			}
			name = rest
		}
		if hdr.Typeflag != tar.TypeReg {
			return fmt.Errorf("%w: entry %q is %s; a bundle holds only regular files", ErrUnsafe, hdr.Name, typeName(hdr.Typeflag))
		}
		if seen.add(name) {
			return fmt.Errorf("%w: entry %q appears twice", ErrUnsafe, name)
		}
		count++
		if lim.MaxEntries > 0 && count > lim.MaxEntries {
			return fmt.Errorf("%w: more than %d entries", ErrUnsafe, lim.MaxEntries)
		}
		if hdr.Size < 0 || (lim.MaxEntryBytes > 0 && hdr.Size > lim.MaxEntryBytes) {
			return fmt.Errorf("%w: entry %q claims %d bytes, over the limit of %d", ErrUnsafe, name, hdr.Size, lim.MaxEntryBytes)
		}
		if name == ManifestName && hdr.Size > manifestMax {
			if onDisk >= 0 {
				return fmt.Errorf("%w: manifest.json claims %d bytes, more than a bundle of %d bytes holds (at most %d): its claims are not to be believed", ErrUnsafe, hdr.Size, onDisk, manifestMax)
			}
			return fmt.Errorf("%w: manifest.json claims %d bytes, over the limit of %d", ErrUnsafe, hdr.Size, manifestMax)
		}
		if lim.MaxTotalBytes > 0 && total+hdr.Size > lim.MaxTotalBytes {
			return fmt.Errorf("%w: the bundle decompresses to more than %d bytes", ErrUnsafe, lim.MaxTotalBytes)
		}
		total += hdr.Size
		// tar.Reader already stops at hdr.Size; the counter makes a short
		// entry (truncated archive) visible.
		// One counter serves every entry (an Entry's Reader is valid only
		// inside fn): no allocation per entry.
		*cr = countReader{r: tr}
		ferr := fn(Entry{Name: name, Size: hdr.Size, Reader: cr})
		if ferr == nil && cr.n < hdr.Size {
			// Drain what fn left, so the checks below see the whole entry.
			_, ferr = io.Copy(io.Discard, cr)
			if ferr != nil {
				ferr = fmt.Errorf("%w: reading entry %q: %w", ErrUnsafe, name, cleanArchiveErr(ferr))
			}
		}
		// The archive's own end comes before whatever fn made of it: a
		// reader that choked on the cut data is not the story.
		if cr.err != nil && isCut(cr.err) {
			return &TruncatedError{Entry: name, Read: cr.n, Size: hdr.Size, Complete: count - 1, After: last}
		}
		if ferr != nil {
			return ferr
		}
		if cr.n != hdr.Size {
			return &TruncatedError{Entry: name, Read: cr.n, Size: hdr.Size, Complete: count - 1, After: last}
		}
		last = name
		return nil
	}
	for {
		if err = ctx.Err(); err != nil {
			break
		}
		var hdr *tar.Header
		hdr, err = tr.Next()
		if errors.Is(err, io.EOF) {
			err = streamEnd(dec, total, lim)
			break
		}
		if err != nil {
			break
		}
		if hdr.Typeflag == tar.TypeXGlobalHeader {
			// A pax global header (git archive writes one) holds no file.
			continue
		}
		if err = entry(hdr); err != nil {
			break
		}
	}
	if err != nil {
		var te *TruncatedError
		if errors.As(err, &te) {
			return te
		}
		if isCut(err) && ctx.Err() == nil {
			// Cut between two entries (inside a tar header or the
			// compressed stream's end).
			return &TruncatedError{Complete: count, After: last}
		}
		if errors.Is(err, ErrUnsafe) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		var ue *userError
		if errors.As(err, &ue) {
			return ue.err
		}
		return fmt.Errorf("%w: %w", ErrUnsafe, cleanArchiveErr(err))
	}
	return nil
}

// MaxTrailingBytes bounds what may follow the tar archive's end inside the
// compressed stream: tar writes its records whole (10 KiB by default),
// padded with zeros; a writer's blocking factor never reaches 1 MiB.
const MaxTrailingBytes = 1 << 20

// streamEnd reads the compressed stream after the archive's end to its own
// end: only then has the decompressor checked the trailer (gzip's CRC-32
// and length, zstd's frame checksum) and that nothing but another whole
// stream follows. A bundle whose trailer is wrong is refused by every
// reader: the bytes it read came from a stream that does not prove them.
// What the stream holds after the archive must be tar's zero padding.
func streamEnd(dec io.Reader, total int64, lim Limits) error {
	budget := int64(MaxTrailingBytes)
	if lim.MaxTotalBytes > 0 {
		budget = min(budget, max(lim.MaxTotalBytes-total, 0))
	}
	buf := make([]byte, 32<<10)
	var n int64
	for {
		k, err := dec.Read(buf)
		n += int64(k)
		if !allZero(buf[:k]) {
			return fmt.Errorf("%w: data follows the archive's end inside the compressed stream, which no manifest accounts for: the bundle was damaged or altered", ErrUnsafe)
		}
		if n > budget {
			return fmt.Errorf("%w: more than %d bytes of padding follow the archive's end", ErrUnsafe, budget)
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			if isCut(err) {
				return err // a TruncatedError after the last entry, below
			}
			return fmt.Errorf("%w: the compressed stream does not check out after the archive's end (%w): the bundle is damaged", ErrUnsafe, err)
		}
	}
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// ErrEncrypted is returned for a bundle encrypted with --encrypt-to: it
// is read once decrypted with the recipient's key.
var ErrEncrypted = errors.New("this bundle is encrypted (age); decrypt it first with the recipient's key: age -d -i KEY -o BUNDLE.tar.gz BUNDLE.tar.gz.age")

// The first bytes of an age file, binary and armored.
const (
	ageMagic = "age-encryption.org/"
	ageArmor = "-----BEGIN AGE ENCRYPTED FILE-----"
)

// userError carries a callback's own error through unchanged.
type userError struct{ err error }

func (u *userError) Error() string { return u.err.Error() }
func (u *userError) Unwrap() error { return u.err }

// Stop returns an error that ends a Walk early and is returned as is.
func Stop(err error) error { return &userError{err: err} }

func cleanArchiveErr(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return errors.New("the archive is truncated (unexpected end of data)")
	}
	return err
}

type countReader struct {
	r   io.Reader
	n   int64
	err error // the first error other than io.EOF
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if err != nil && err != io.EOF && c.err == nil {
		c.err = err
	}
	return n, err
}

// ErrTruncated is wrapped by a *TruncatedError.
var ErrTruncated = errors.New("the bundle is truncated")

// TruncatedError says where an archive ended early: a bundle cut by an
// interrupted copy or upload. Every entry before the cut was read whole
// and given to the walk's callback. It wraps ErrTruncated and, for every
// reader that does not handle half-bundles, ErrUnsafe.
type TruncatedError struct {
	// Entry is the entry the data ended in, with Read of its Size bytes;
	// empty when the archive ended between two entries.
	Entry string `json:"entry,omitempty"`
	Read  int64  `json:"read,omitempty"`
	Size  int64  `json:"size,omitempty"`
	// Complete counts the entries read whole; After is the last of them.
	Complete int    `json:"complete_entries"`
	After    string `json:"after,omitempty"`
}

func (e *TruncatedError) Error() string {
	switch {
	case e.Entry != "":
		return fmt.Sprintf("the bundle is truncated at entry %q (%d of its %d bytes present; %d entries before it read whole)",
			e.Entry, e.Read, e.Size, e.Complete)
	case e.After != "":
		return fmt.Sprintf("the bundle is truncated after entry %q (%d entries read whole; unexpected end of data)", e.After, e.Complete)
	}
	return "the bundle is truncated before its first entry, manifest.json, is whole (unexpected end of data): nothing in it can be read"
}

// Is makes errors.Is(err, ErrTruncated) and errors.Is(err, ErrUnsafe) true.
func (e *TruncatedError) Is(target error) bool { return target == ErrTruncated || target == ErrUnsafe }

// isCut reports whether a read error means the data ended early.
func isCut(err error) bool {
	return errors.Is(err, io.ErrUnexpectedEOF)
}

func safeName(name string) (string, error) {
	if name == "" || strings.HasPrefix(name, "/") || strings.Contains(name, "\\") || strings.ContainsRune(name, 0) {
		return "", fmt.Errorf("%w: entry name %q is absolute or malformed", ErrUnsafe, name)
	}
	for rest := name; rest != ""; {
		part, after, _ := strings.Cut(rest, "/")
		if part == ".." {
			return "", fmt.Errorf("%w: entry name %q leaves the bundle (..)", ErrUnsafe, name)
		}
		rest = after
	}
	c := path.Clean(name)
	if c != name || c == "." {
		return "", fmt.Errorf("%w: entry name %q is not in canonical form", ErrUnsafe, name)
	}
	return c, nil
}

func typeName(t byte) string {
	switch t {
	case tar.TypeSymlink:
		return "a symbolic link"
	case tar.TypeLink:
		return "a hard link"
	case tar.TypeDir:
		return "a directory"
	case tar.TypeChar, tar.TypeBlock:
		return "a device node"
	case tar.TypeFifo:
		return "a FIFO"
	}
	return fmt.Sprintf("of tar type %q", t)
}

// MaxManifestBytes bounds manifest.json.
const MaxManifestBytes = 256 << 20

// ManifestBudget is the largest manifest.json a bundle of size bytes on
// disk is believed to hold: 1 MiB plus 32 times its size. Reading a
// manifest costs memory in proportion to its decompressed size (the
// schema check decodes it whole), and a few megabytes of gzip can claim
// millions of files. A real manifest cannot compress that far: each file
// it lists carries a sha256 digest, which does not compress, and is
// itself in the archive behind a tar header. A collection of a real node
// has its manifest at 0.2× the bundle's size; the worst real case, every
// file empty (one digest, repeated), measured 19.5× with 20,000 files. So
// 32× refuses no real bundle and bounds every reader's memory by the
// bundle's size, not by what its manifest says.
func ManifestBudget(size int64) int64 {
	if size < 0 {
		return MaxManifestBytes
	}
	return min(int64(MaxManifestBytes), 1<<20+32*size)
}

// ReadManifest returns the manifest and its raw bytes, reading only the
// first entry.
func ReadManifest(ctx context.Context, p string) (*Manifest, []byte, error) {
	return readManifest(func(fn func(Entry) error) error { return Walk(ctx, p, DefaultLimits, fn) })
}

// ReadManifestFrom is ReadManifest of a bundle stream (a .tar.gz or
// .tar.zst file already opened).
func ReadManifestFrom(ctx context.Context, r io.Reader) (*Manifest, []byte, error) {
	return readManifest(func(fn func(Entry) error) error { return WalkReader(ctx, r, DefaultLimits, fn) })
}

func readManifest(walk WalkFunc) (*Manifest, []byte, error) {
	var raw []byte
	errFound := errors.New("found")
	err := walk(func(e Entry) error {
		if e.Name != ManifestName {
			return Stop(fmt.Errorf("%w: the first entry is %q, not %s", ErrUnsafe, e.Name, ManifestName))
		}
		b, err := io.ReadAll(io.LimitReader(e.Reader, MaxManifestBytes+1))
		if err != nil {
			return err
		}
		if len(b) > MaxManifestBytes {
			return Stop(fmt.Errorf("%w: manifest.json is larger than %d bytes", ErrUnsafe, MaxManifestBytes))
		}
		raw = b
		return Stop(errFound)
	})
	if err != nil && !errors.Is(err, errFound) {
		return nil, nil, err
	}
	if raw == nil {
		return nil, nil, fmt.Errorf("%w: the archive is empty", ErrUnsafe)
	}
	m, err := ParseManifest(raw)
	return m, raw, err
}

// CheckSchemaVersion checks that manifest bytes are JSON of a schema
// version this nodesnap reads, without decoding the rest.
func CheckSchemaVersion(raw []byte) error {
	_, err := schemaVersion(raw)
	return err
}

func schemaVersion(raw []byte) (int, error) {
	var probe struct {
		SchemaVersion *int `json:"schema_version"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return 0, fmt.Errorf("%w: manifest.json is not valid JSON: %w", ErrUnsafe, err)
	}
	if probe.SchemaVersion == nil {
		return 0, fmt.Errorf("%w: manifest.json has no schema_version", ErrUnsafe)
	}
	if v := *probe.SchemaVersion; v < MinSchemaVersion || v > SchemaVersion {
		return 0, fmt.Errorf("%w: manifest schema version %d is not supported (this nodesnap reads versions %d to %d)", ErrUnsafe, v, MinSchemaVersion, SchemaVersion)
	}
	return *probe.SchemaVersion, nil
}

// CheckManifest checks the schema version of manifest bytes and, from
// version 2, their own checksum (VerifyManifest).
func CheckManifest(raw []byte) error {
	v, err := schemaVersion(raw)
	if err != nil {
		return err
	}
	return VerifyManifest(raw, v)
}

// ParseManifest decodes manifest bytes after CheckManifest: every reader
// decodes the manifest here, so none reads one whose bytes changed.
func ParseManifest(raw []byte) (*Manifest, error) {
	if err := CheckManifest(raw); err != nil {
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("%w: manifest.json does not match the schema: %w", ErrUnsafe, err)
	}
	return &m, nil
}
