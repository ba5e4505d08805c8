package hostfs

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/engine/isolate"
	"github.com/nodesnap/nodesnap/internal/inroot"
)

// The worker side: operations that run in an isolated worker process.

// Worker ops.
const (
	OpList = "hostfs.list"
	OpGlob = "hostfs.glob"
)

func init() {
	isolate.RegisterOp(OpList, isolate.Typed(listOp))
	isolate.RegisterOp(OpGlob, isolate.Typed(globOp))
}

// ListRequest lists one directory, at most Max entries.
type ListRequest struct {
	Path string `json:"path"`
	Max  int    `json:"max"`
}

// Listing holds a directory's names and d_types; Truncated when Max was
// hit.
type Listing struct {
	Entries   []Dirent `json:"entries"`
	Truncated bool     `json:"truncated,omitempty"`
}

// Dirent is one name with its d_type (unix.DT_DIR, ...).
type Dirent struct {
	Name string `json:"name"`
	Type uint8  `json:"type"`
}

// IsDir reports whether the kernel said the entry is a directory.
func (d Dirent) IsDir() bool { return d.Type == unix.DT_DIR }

// MaybeFile reports whether the entry may be a regular file: the kernel
// said so, or its filesystem does not say (DT_UNKNOWN), in which case the
// open that follows finds out.
func (d Dirent) MaybeFile() bool { return d.Type == unix.DT_REG || d.Type == unix.DT_UNKNOWN }

// listOp reads one directory with getdents64 and keeps d_type as the
// kernel gave it. os.File.ReadDir would lstat() entries whose type is
// unknown, and an lstat of a mountpoint entry enters that mount.
func listOp(rq ListRequest) (any, error) {
	return ListDir(rq.Path, rq.Max)
}

// ListDir is the listing itself, for worker ops that walk a tree (it
// blocks on a hung mount: call it only inside a worker).
func ListDir(dir string, max int) (Listing, error) {
	if max <= 0 {
		max = 10000
	}
	fd, err := inroot.Process().Open(dir, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return Listing{}, err
	}
	defer func() { _ = unix.Close(fd) }() // read-only: nothing to lose
	res := Listing{Entries: []Dirent{}}
	buf := make([]byte, 32<<10)
	for {
		n, err := unix.Getdents(fd, buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return Listing{}, fmt.Errorf("readdir %s: %w", dir, err)
		}
		if n <= 0 {
			sortEntries(res.Entries)
			return res, nil
		}
		for _, e := range ParseDirents(buf[:n]) {
			if e.Name == "." || e.Name == ".." {
				continue
			}
			if len(res.Entries) >= max {
				res.Truncated = true
				sortEntries(res.Entries)
				return res, nil
			}
			res.Entries = append(res.Entries, e)
		}
	}
}

func sortEntries(es []Dirent) {
	sort.Slice(es, func(i, j int) bool { return es[i].Name < es[j].Name })
}

// ParseDirents decodes linux_dirent64 records (ino u64, off s64, reclen
// u16, type u8, NUL-terminated name), stopping at the first malformed one.
func ParseDirents(b []byte) []Dirent {
	var out []Dirent
	for len(b) >= 19 {
		reclen := int(binary.NativeEndian.Uint16(b[16:18]))
		if reclen < 19 || reclen > len(b) {
			break
		}
		name := b[19:reclen]
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		out = append(out, Dirent{Name: string(name), Type: b[18]})
		b = b[reclen:]
	}
	return out
}

// GlobRequest expands one glob, at most Max matches.
type GlobRequest struct {
	Pattern string `json:"pattern"`
	Max     int    `json:"max"`
}

// GlobResult holds the matches, as nodesnap sees them.
type GlobResult struct {
	Matches   []string `json:"matches"`
	Truncated bool     `json:"truncated,omitempty"`
}

func globOp(rq GlobRequest) (any, error) {
	m, err := globInRoot(rq.Pattern)
	if err != nil {
		return nil, fmt.Errorf("glob %s: %w", rq.Pattern, err)
	}
	r := GlobResult{Matches: m}
	if rq.Max > 0 && len(m) > rq.Max {
		r.Matches, r.Truncated = m[:rq.Max], true
	}
	return r, nil
}

// globInRoot is filepath.Glob with every directory listed and every
// name checked inside the worker's boundary: a link in the pattern's way
// resolves as it would on the host, never outside the root.
func globInRoot(pattern string) ([]string, error) {
	pattern = filepath.Clean(pattern)
	if _, err := filepath.Match(pattern, ""); err != nil {
		return nil, err
	}
	parts := strings.Split(strings.TrimPrefix(pattern, "/"), "/")
	fixed := "/"
	i := 0
	for ; i < len(parts) && !hasMeta(parts[i]); i++ {
		fixed = filepath.Join(fixed, unescape(parts[i]))
	}
	b := inroot.Process()
	matches := []string{fixed}
	if i == len(parts) {
		fd, err := b.Open(fixed, unix.O_PATH|unix.O_NOFOLLOW)
		if err != nil {
			return nil, nil
		}
		_ = unix.Close(fd)
		return matches, nil
	}
	for ; i < len(parts); i++ {
		var next []string
		for _, dir := range matches {
			if !hasMeta(parts[i]) {
				p := filepath.Join(dir, unescape(parts[i]))
				if fd, err := b.Open(p, unix.O_PATH|unix.O_NOFOLLOW); err == nil {
					_ = unix.Close(fd)
					next = append(next, p)
				}
				continue
			}
			l, err := ListDir(dir, 1<<20)
			if err != nil {
				continue // not a directory, or gone: as filepath.Glob
			}
			for _, e := range l.Entries {
				if ok, _ := filepath.Match(parts[i], e.Name); ok {
					next = append(next, filepath.Join(dir, e.Name))
				}
			}
		}
		matches = next
	}
	sort.Strings(matches)
	return matches, nil
}

func hasMeta(s string) bool { return strings.ContainsAny(s, "*?[\\") }

func unescape(s string) string { return strings.ReplaceAll(s, "\\", "") }
