package bundle

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/mholt/archives"
	"golang.org/x/sys/unix"
)

// Compression formats.
const (
	Gzip = "tar.gz"
	Zstd = "tar.zst"
)

// Format returns the archives format for a compression name.
func Format(name string) (archives.CompressedArchive, error) {
	switch name {
	case Gzip, "":
		return archives.CompressedArchive{Compression: archives.Gz{Multithreaded: true}, Archival: archives.Tar{NumericUIDGID: true}, Extraction: archives.Tar{}}, nil
	case Zstd:
		return archives.CompressedArchive{Compression: archives.Zstd{}, Archival: archives.Tar{NumericUIDGID: true}, Extraction: archives.Tar{}}, nil
	}
	return archives.CompressedArchive{}, fmt.Errorf("unknown bundle format %q (want %s or %s)", name, Gzip, Zstd)
}

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
	af, err := Format(format)
	if err != nil {
		return w, err
	}
	mj, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return w, fmt.Errorf("encoding the manifest: %w", err)
	}
	mj = append(mj, '\n')
	top := TopDir(filepath.Base(out)) + "/"
	files := []archives.FileInfo{memFile(top+ManifestName, mj, mtime)}
	total := int64(len(mj))
	for _, fe := range m.Files {
		files = append(files, diskFile(top+fe.Path, filepath.Join(staging, filepath.FromSlash(fe.Path)), fe.Size, mtime))
		total += fe.Size
	}
	if gz, ok := af.Compression.(archives.Gz); ok && total < parallelGzipMin {
		// pgzip compresses 1 MiB blocks on separate goroutines: below a
		// few blocks its setup costs more than it saves
		// (BenchmarkGzipSmall: 0.82x the time at 870 KiB).
		gz.Multithreaded = false
		af.Compression = gz
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
	// archives ignores the errors of the compressor's and tar writer's
	// Close; errWriter remembers the first write error so a full disk at
	// the very end is still caught.
	if err = af.Archive(ctx, sink, files); err != nil {
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

// entryInfo is the fs.FileInfo of an archive entry: a regular file, 0600,
// with the run's end time, owned by nobody in particular.
type entryInfo struct {
	name  string
	size  int64
	mtime time.Time
}

func (e entryInfo) Name() string       { return filepath.Base(e.name) }
func (e entryInfo) Size() int64        { return e.size }
func (e entryInfo) Mode() fs.FileMode  { return 0o600 }
func (e entryInfo) ModTime() time.Time { return e.mtime }
func (e entryInfo) IsDir() bool        { return false }
func (e entryInfo) Sys() any           { return nil }

func memFile(name string, data []byte, mtime time.Time) archives.FileInfo {
	return archives.FileInfo{
		FileInfo:      entryInfo{name: name, size: int64(len(data)), mtime: mtime},
		NameInArchive: name,
		Open: func() (fs.File, error) {
			return &memHandle{Reader: bytes.NewReader(data), info: entryInfo{name: name, size: int64(len(data)), mtime: mtime}}, nil
		},
	}
}

type memHandle struct {
	*bytes.Reader
	info entryInfo
}

func (m *memHandle) Stat() (fs.FileInfo, error) { return m.info, nil }
func (m *memHandle) Close() error               { return nil }

// diskFile is a staged file. Its size was fixed when it was hashed; the
// reader is limited to it so that the tar header is always right.
func diskFile(name, path string, size int64, mtime time.Time) archives.FileInfo {
	info := entryInfo{name: name, size: size, mtime: mtime}
	return archives.FileInfo{
		FileInfo:      info,
		NameInArchive: name,
		Open: func() (fs.File, error) {
			f, err := os.Open(path)
			if err != nil {
				return nil, err
			}
			return &limitedFile{f: f, r: io.LimitReader(f, size), info: info}, nil
		},
	}
}

type limitedFile struct {
	f    *os.File
	r    io.Reader
	info entryInfo
}

func (l *limitedFile) Read(p []byte) (int, error) { return l.r.Read(p) }
func (l *limitedFile) Stat() (fs.FileInfo, error) { return l.info, nil }
func (l *limitedFile) Close() error               { return l.f.Close() }

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
