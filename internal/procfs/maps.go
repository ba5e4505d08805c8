package procfs

import (
	"math"
	"strings"
)

// deletedSuffix is what d_path() appends to the path of an unlinked file.
// A file really named "x (deleted)" looks the same; the kernel gives no way
// to tell them apart.
const deletedSuffix = " (deleted)"

// MapEntry is one line of /proc/<pid>/maps:
//
//	7f2e9cb83000-7f2e9cb85000 rw-p 00033000 fe:00 325835    /usr/lib/ld-linux.so.2
type MapEntry struct {
	// Start and End are the mapping's address range, End exclusive.
	Start uint64 `json:"start"`
	End   uint64 `json:"end"`
	// Perms is the four-letter permission string, e.g. "r-xp" ('p'
	// private, 's' shared).
	Perms string `json:"perms"`
	// Offset is the offset into the mapped file.
	Offset uint64 `json:"offset"`
	// Major and Minor are the device of the mapped file (0:0 for anonymous
	// memory). The kernel writes them in hexadecimal here, unlike in
	// mountinfo; Dev() formats them in decimal so the two can be compared.
	Major uint32 `json:"major"`
	Minor uint32 `json:"minor"`
	// Inode is the mapped file's inode number, 0 for anonymous memory.
	Inode uint64 `json:"inode"`
	// Pathname is the mapped file's path with any " (deleted)" suffix
	// removed, or a pseudo-path such as "[heap]", "[stack]", "[vdso]",
	// "[anon:name]"; empty for anonymous memory. It may contain spaces.
	Pathname string `json:"pathname,omitempty"`
	// Deleted is set when the kernel marked the file as unlinked. A deleted
	// file mapped by a process still pins its filesystem.
	Deleted bool `json:"deleted,omitempty"`
}

// Dev returns the device number as decimal "major:minor", comparable with
// Mount.Dev.
func (e MapEntry) Dev() string {
	return DevString(e.Major, e.Minor)
}

// IsFile reports whether the mapping is backed by a file (as opposed to
// anonymous memory or a kernel pseudo-mapping), and so holds a filesystem.
func (e MapEntry) IsFile() bool {
	return e.Inode != 0 && strings.HasPrefix(e.Pathname, "/")
}

var (
	errMapsFields = missing("maps: fewer than 5 fields")
	errMapsRange  = malformed(`maps: address range is not "start-end" in hexadecimal`)
	errMapsOrder  = malformed("maps: range end is not above its start")
	errMapsPerms  = malformed("maps: permissions are not four of [r-][w-][x-][ps]")
	errMapsOffset = malformed("maps: offset is not hexadecimal")
	errMapsDev    = malformed(`maps: device is not "major:minor" in hexadecimal`)
	errMapsInode  = malformed("maps: inode is not a decimal number")
)

// ParseMaps parses /proc/<pid>/maps. Lines it cannot parse are reported in
// bad and skipped; blank lines are ignored. Like ParseMountInfo, it copies
// the input once and slices every string from that copy.
func ParseMaps(data []byte) (entries []MapEntry, bad []LineError) {
	if len(data) == 0 {
		return nil, nil
	}
	s := string(data)
	entries = make([]MapEntry, 0, countLines(s, minMapsLine))
	var errs badLines
	for n := 1; s != ""; n++ {
		var line string
		line, s, _ = strings.Cut(s, "\n")
		if isBlank(line) {
			continue
		}
		e, err := parseMapsLine(line)
		if err != nil {
			errs.add(n, line, err)
			continue
		}
		entries = append(entries, e)
	}
	return entries, errs.result()
}

// minMapsLine is the length of the shortest valid line, "0-1 ---p 0 0:0 0".
const minMapsLine = 16

func parseMapsLine(line string) (MapEntry, error) {
	var e MapEntry
	// The five fixed fields are separated by single spaces; the pathname
	// follows after padding to a column, and may itself hold spaces.
	var f [5]string
	rest := line
	for i := range f {
		var ok bool
		f[i], rest, ok = strings.Cut(rest, " ")
		if f[i] == "" || (!ok && i < len(f)-1) {
			return e, errMapsFields
		}
	}
	start, end, ok := strings.Cut(f[0], "-")
	if !ok {
		return e, errMapsRange
	}
	var ok1, ok2 bool
	e.Start, ok1 = parseUint(start, 16, math.MaxUint64)
	e.End, ok2 = parseUint(end, 16, math.MaxUint64)
	if !ok1 || !ok2 {
		return e, errMapsRange
	}
	if e.End <= e.Start {
		return e, errMapsOrder
	}
	if !validPerms(f[1]) {
		return e, errMapsPerms
	}
	e.Perms = f[1]
	if e.Offset, ok = parseUint(f[2], 16, math.MaxUint64); !ok {
		return e, errMapsOffset
	}
	maj, mnr, ok := strings.Cut(f[3], ":")
	if !ok {
		return e, errMapsDev
	}
	major, ok1 := parseUint(maj, 16, math.MaxUint32)
	minor, ok2 := parseUint(mnr, 16, math.MaxUint32)
	if !ok1 || !ok2 {
		return e, errMapsDev
	}
	e.Major, e.Minor = uint32(major), uint32(minor)
	if e.Inode, ok = parseUint(f[4], 10, math.MaxUint64); !ok {
		return e, errMapsInode
	}

	// No path can start with a space ('/', '[', or "anon_inode:"), so all
	// leading spaces are padding.
	path := strings.TrimLeft(rest, " ")
	if p, ok := strings.CutSuffix(path, deletedSuffix); ok {
		path, e.Deleted = p, true
	}
	// seq_file_path() escapes only the newline (as \012); a literal
	// backslash is written as is, so no other escape may be undone.
	if strings.Contains(path, `\012`) {
		path = strings.ReplaceAll(path, `\012`, "\n")
	}
	e.Pathname = path
	return e, nil
}

func validPerms(p string) bool {
	return len(p) == 4 &&
		(p[0] == 'r' || p[0] == '-') &&
		(p[1] == 'w' || p[1] == '-') &&
		(p[2] == 'x' || p[2] == '-') &&
		(p[3] == 'p' || p[3] == 's')
}
