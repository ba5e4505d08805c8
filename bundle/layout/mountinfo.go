package layout

import (
	"bytes"
	"strconv"
)

// The raw mount tables of every namespace in one file (MountinfoTablesFile),
// each table byte for byte after a header line:
//
//	==> mnt:[4026531841] pid=1 tid=1 host <==
//	22 1 259:1 / / rw,relatime shared:1 - ext4 /dev/root rw
//	...
//	==> mnt:[4026532712] pid=4242 tid=4242 <==
//	...
//
// like the headers of `tail` over several files, so that
// `grep -e '^==>' -e rbd3 mounts/mountinfo.txt` answers which namespace
// mounts a device. "mnt:[inode]" is what readlink /proc/<pid>/ns/mnt
// prints. A mountinfo line starts with its mount ID, a number, so no line
// of a table starts with "==> ". Words after the task:
//
//	host           the host's mount namespace (pid 1's)
//	truncated      the table was cut at the size cap
//	newline-added  the cut table did not end with a newline, and one was
//	               added before the next header (it is not the table's)
//
// Readers ignore words they do not know.

// MountinfoHeader is the header line of one table.
type MountinfoHeader struct {
	Inode        uint64
	PID, TID     int
	Host         bool
	Truncated    bool
	NewlineAdded bool
}

const (
	mountinfoHeaderOpen  = "==> mnt:["
	mountinfoHeaderClose = " <=="
)

// FormatMountinfoHeader returns h's line, with its newline.
func FormatMountinfoHeader(h MountinfoHeader) string {
	b := make([]byte, 0, 64)
	b = append(b, mountinfoHeaderOpen...)
	b = strconv.AppendUint(b, h.Inode, 10)
	b = append(b, ']')
	if h.PID > 0 {
		b = append(b, " pid="...)
		b = strconv.AppendInt(b, int64(h.PID), 10)
	}
	if h.TID > 0 {
		b = append(b, " tid="...)
		b = strconv.AppendInt(b, int64(h.TID), 10)
	}
	if h.Host {
		b = append(b, " host"...)
	}
	if h.Truncated {
		b = append(b, " truncated"...)
	}
	if h.NewlineAdded {
		b = append(b, " newline-added"...)
	}
	b = append(b, mountinfoHeaderClose...)
	b = append(b, '\n')
	return string(b)
}

// IsMountinfoHeader reports whether line (without its newline) looks like
// a header: a mountinfo line never starts with "==> ".
func IsMountinfoHeader(line []byte) bool {
	return bytes.HasPrefix(line, []byte(mountinfoHeaderOpen))
}

// ParseMountinfoHeader parses a header line (with or without its newline).
// ok is false for a line that is not a well-formed header.
func ParseMountinfoHeader(line []byte) (h MountinfoHeader, ok bool) {
	line = bytes.TrimSuffix(line, []byte("\n"))
	rest, found := bytes.CutPrefix(line, []byte(mountinfoHeaderOpen))
	if !found {
		return h, false
	}
	rest, found = bytes.CutSuffix(rest, []byte(mountinfoHeaderClose))
	if !found {
		return h, false
	}
	inode, rest, found := bytes.Cut(rest, []byte("]"))
	if !found {
		return h, false
	}
	n, err := strconv.ParseUint(string(inode), 10, 64)
	if err != nil || n == 0 {
		return h, false
	}
	h.Inode = n
	for _, w := range bytes.Fields(rest) {
		k, v, kv := bytes.Cut(w, []byte("="))
		switch {
		case kv && string(k) == "pid":
			h.PID, ok = atoiPositive(v)
		case kv && string(k) == "tid":
			h.TID, ok = atoiPositive(v)
		case !kv && string(w) == "host":
			h.Host, ok = true, true
		case !kv && string(w) == "truncated":
			h.Truncated, ok = true, true
		case !kv && string(w) == "newline-added":
			h.NewlineAdded, ok = true, true
		default:
			ok = true // a word of a later version
		}
		if !ok {
			return MountinfoHeader{}, false
		}
	}
	return h, true
}

func atoiPositive(b []byte) (int, bool) {
	n, err := strconv.Atoi(string(b))
	return n, err == nil && n > 0
}

// EachMountinfoTable calls fn with every table of a tables file, as it was
// read (an added newline removed). Bytes before the first header, which a
// well-formed file does not have, are passed with a zero header.
func EachMountinfoTable(data []byte, fn func(h MountinfoHeader, table []byte)) {
	var cur MountinfoHeader
	start, pos := 0, 0
	emit := func(end int) {
		t := data[start:end]
		if cur.NewlineAdded {
			t = bytes.TrimSuffix(t, []byte("\n"))
		}
		if cur.Inode != 0 || len(t) > 0 {
			fn(cur, t)
		}
	}
	for pos < len(data) {
		end := bytes.IndexByte(data[pos:], '\n')
		next := len(data)
		if end >= 0 {
			next = pos + end + 1
		}
		if h, ok := ParseMountinfoHeader(data[pos:next]); ok {
			emit(pos)
			cur, start = h, next
		}
		pos = next
	}
	emit(len(data))
}
