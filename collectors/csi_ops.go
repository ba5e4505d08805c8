package collectors

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// The csi collector's worker operations: directory listings and globs that may meet a hung mount.

// Worker ops.
const (
	opCSIReadDir = "csi.readdir"
	opCSIGlob    = "csi.glob"
)

// CSIReadDirRequest lists one directory, at most Max entries.
type CSIReadDirRequest struct {
	Path string `json:"path"`
	Max  int    `json:"max"`
}

// CSIReadDirResult holds names and d_types; Truncated when Max was hit.
type CSIReadDirResult struct {
	Entries   []CSIReadDirEntry `json:"entries"`
	Truncated bool              `json:"truncated,omitempty"`
}

// CSIReadDirEntry is one name with its d_type.
type CSIReadDirEntry struct {
	Name string `json:"name"`
	Type uint8  `json:"type"`
}

// csiReadDirOp reads one directory with getdents64 and keeps d_type as the
// kernel gave it. os.ReadDir would lstat() entries whose type is unknown,
// and an lstat of a mountpoint entry enters that mount.
func csiReadDirOp(rq CSIReadDirRequest) (any, error) {
	if rq.Max <= 0 {
		rq.Max = 10000
	}
	fd, err := unix.Open(rq.Path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", rq.Path, err)
	}
	defer unix.Close(fd)
	res := CSIReadDirResult{Entries: []CSIReadDirEntry{}}
	buf := make([]byte, 32<<10)
	for {
		n, err := unix.Getdents(fd, buf)
		if err != nil {
			return nil, fmt.Errorf("readdir %s: %w", rq.Path, err)
		}
		if n <= 0 {
			return res, nil
		}
		for _, e := range parseDirents(buf[:n]) {
			if e.Name == "." || e.Name == ".." {
				continue
			}
			if len(res.Entries) >= rq.Max {
				res.Truncated = true
				return res, nil
			}
			res.Entries = append(res.Entries, e)
		}
	}
}

// parseDirents decodes linux_dirent64 records: ino u64, off s64, reclen
// u16, type u8, NUL-terminated name.
func parseDirents(b []byte) []CSIReadDirEntry {
	var out []CSIReadDirEntry
	for len(b) >= 19 {
		reclen := int(binary.NativeEndian.Uint16(b[16:18]))
		if reclen < 19 || reclen > len(b) {
			break
		}
		name := b[19:reclen]
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		out = append(out, CSIReadDirEntry{Name: string(name), Type: b[18]})
		b = b[reclen:]
	}
	return out
}

// CSIGlobRequest expands one glob, at most Max matches.
type CSIGlobRequest struct {
	Pattern string `json:"pattern"`
	Max     int    `json:"max"`
}

func csiGlobOp(rq CSIGlobRequest) (any, error) {
	m, err := filepath.Glob(rq.Pattern)
	if err != nil {
		return nil, err
	}
	if rq.Max > 0 && len(m) > rq.Max {
		m = m[:rq.Max]
	}
	return m, nil
}

func csiTypeName(name string, t uint8) string {
	switch t {
	case unix.DT_DIR:
		return "dir"
	case unix.DT_REG:
		if strings.HasSuffix(name, ".json") {
			return "json"
		}
		return "file"
	case unix.DT_SOCK:
		return "socket"
	case unix.DT_LNK:
		return "symlink"
	case unix.DT_UNKNOWN:
		return "unknown"
	}
	return "other"
}
