package bundle

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// parallelGzipMin is the uncompressed size from which a gzip bundle is
// compressed on several goroutines.
const parallelGzipMin = 4 << 20

// Written describes a finished bundle.
type Written struct {
	Path   string
	Size   int64
	SHA256 string
}

// ErrNoSpace is wrapped when the output filesystem is full.
var ErrNoSpace = errors.New("no space left on the output filesystem")

// WriteOptions are Write's less common wishes.
type WriteOptions struct {
	// Encrypt, when set, wraps the file: what it writes is what lands on
	// disk (an age encryptor), and Written's size and sha256 are of that.
	// The plaintext archive then never touches the disk.
	Encrypt func(io.Writer) (io.WriteCloser, error)
	// NoReplace fails with an error wrapping fs.ErrExist when something is
	// at out already, instead of replacing it (--output-file).
	NoReplace bool
}

// Write archives manifest (first) and the files it lists, read from
// staging, into out, every entry in one top-level directory named after
// out (TopDir), so that tar xzf makes one directory. It writes to a
// temporary file beside out and renames it into place only when complete
// and synced, so a reader never sees half a bundle. On any error the
// temporary file is removed.
func Write(ctx context.Context, out, format string, m *Manifest, staging string, mtime time.Time) (w Written, err error) {
	return WriteWith(ctx, out, format, m, staging, mtime, WriteOptions{})
}

// WriteWith is Write with options.
func WriteWith(ctx context.Context, out, format string, m *Manifest, staging string, mtime time.Time, o WriteOptions) (w Written, err error) {
	format, err = Format(format)
	if err != nil {
		return w, err
	}
	mj, err := MarshalManifest(m)
	if err != nil {
		return w, err
	}
	total := int64(len(mj))
	for _, fe := range m.Files {
		total += fe.Size
	}

	tmp, f, err := createTemp(out)
	if err != nil {
		return w, err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	h := sha256.New()
	ew := &errWriter{w: f, h: h}
	var sink io.Writer = ew
	var enc io.WriteCloser
	if o.Encrypt != nil {
		if enc, err = o.Encrypt(ew); err != nil {
			return w, fmt.Errorf("encrypting the bundle: %w", err)
		}
		sink = enc
	}
	// pgzip compresses 1 MiB blocks on separate goroutines: below a few
	// blocks its setup costs more than it saves (BenchmarkGzipSmall: 0.82x
	// the time at 870 KiB).
	top := TopDir(filepath.Base(out)) + "/"
	if err = writeArchive(ctx, sink, format, total >= parallelGzipMin, top, mj, m.Files, staging, mtime); err != nil {
		return w, wrapSpace(fmt.Errorf("writing the bundle: %w", err))
	}
	if enc != nil {
		if err = enc.Close(); err != nil {
			return w, wrapSpace(fmt.Errorf("encrypting the bundle: %w", err))
		}
	}
	if ew.err != nil {
		return w, wrapSpace(fmt.Errorf("writing the bundle: %w", ew.err))
	}
	if err = f.Sync(); err != nil {
		return w, wrapSpace(fmt.Errorf("flushing the bundle to disk: %w", err))
	}
	if err = f.Close(); err != nil {
		return w, wrapSpace(fmt.Errorf("closing the bundle: %w", err))
	}
	if o.NoReplace {
		err = PlaceNoReplace(tmp, out)
		if err == nil {
			_ = os.Remove(tmp)
		}
	} else {
		err = os.Rename(tmp, out)
	}
	if err != nil {
		return w, fmt.Errorf("moving the bundle into place: %w", err)
	}
	syncDir(filepath.Dir(out))
	return Written{Path: out, Size: ew.n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// writeArchive writes the tar archive, manifest first, compressed, to w,
// every entry's name prefixed with top ("dir/"). Every entry is a regular
// file, 0600, with the run's end time and numeric owner 0.
func writeArchive(ctx context.Context, w io.Writer, format string, parallel bool, top string, manifest []byte, files []FileEntry, staging string, mtime time.Time) error {
	cw, err := newCompressor(w, format, parallel)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(cw)
	err = writeEntry(tw, top+ManifestName, int64(len(manifest)), mtime, bytes.NewReader(manifest))
	for _, fe := range files {
		if err != nil {
			break
		}
		if err = ctx.Err(); err != nil {
			break
		}
		err = copyStaged(tw, top, fe, filepath.Join(staging, filepath.FromSlash(fe.Path)), mtime)
	}
	// Close both even after an error: pgzip's goroutines stop on Close.
	if cerr := tw.Close(); err == nil {
		err = cerr
	}
	if cerr := cw.Close(); err == nil {
		err = cerr
	}
	return err
}

// copyStaged writes a staged file. Its size was fixed when it was hashed;
// the reader is limited to it so that the tar header is always right.
func copyStaged(tw *tar.Writer, top string, fe FileEntry, path string, mtime time.Time) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("file %s: %w", fe.Path, err)
	}
	defer f.Close()
	return writeEntry(tw, top+fe.Path, fe.Size, mtime, io.LimitReader(f, fe.Size))
}

func writeEntry(tw *tar.Writer, name string, size int64, mtime time.Time, r io.Reader) error {
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: name, Size: size, Mode: 0o600, ModTime: mtime}
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("file %s: writing header: %w", name, err)
	}
	if _, err := io.Copy(tw, r); err != nil {
		return fmt.Errorf("file %s: writing data: %w", name, err)
	}
	return nil
}

// TempPrefix starts the name of every temporary file nodesnap writes beside
// its output, so stale ones (from a run that was SIGKILLed) can be found.
const TempPrefix = ".nodesnap-"

func createTemp(out string) (string, *os.File, error) {
	dir, base := filepath.Split(out)
	if dir == "" {
		dir = "."
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(dir, fmt.Sprintf("%s%d-%s-%s.tmp", TempPrefix, os.Getpid(), hex.EncodeToString(rnd[:]), base))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", nil, wrapSpace(fmt.Errorf("creating the bundle in %s: %w", dir, err))
	}
	return tmp, f, nil
}

func wrapSpace(err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return fmt.Errorf("%w: %w", ErrNoSpace, err)
	}
	return err
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}

type errWriter struct {
	w   io.Writer
	h   hash.Hash
	n   int64
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.h.Write(p[:n])
	e.n += int64(n)
	if err != nil {
		e.err = err
	}
	return n, err
}

// HashFile returns the size and sha256 of a staged file.
func HashFile(path string) (int64, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return n, "", err
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}

// TopDir is the directory a bundle's entries sit in: its file name
// without the extension (.tar.gz, .tar.zst, and .age when encrypted).
func TopDir(name string) string {
	name = strings.TrimSuffix(name, ".age")
	for _, e := range []string{"." + Gzip, "." + Zstd} {
		name = strings.TrimSuffix(name, e)
	}
	if name == "" || name == "." || name == ".." {
		return "nodesnap"
	}
	return name
}

// PlaceNoReplace gives the file at tmp the name path, failing with an
// error wrapping fs.ErrExist if anything (a file, a link) is there:
// link(2) where the filesystem has hard links, renameat2(RENAME_NOREPLACE)
// where not. The caller removes tmp once linked.
func PlaceNoReplace(tmp, path string) error {
	err := unix.Linkat(unix.AT_FDCWD, tmp, unix.AT_FDCWD, path, 0)
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		err = unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, path, unix.RENAME_NOREPLACE)
	}
	if err != nil {
		return &os.LinkError{Op: "place", Old: tmp, New: path, Err: err}
	}
	return nil
}
