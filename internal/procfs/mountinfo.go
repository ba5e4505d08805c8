package procfs

import (
	"math"
	"strconv"
	"strings"
)

// Mount is one line of /proc/<pid>/mountinfo (see proc_pid_mountinfo(5)):
//
//	36 35 98:0 /mnt1 /mnt/parent rw,noatime master:1 - ext3 /dev/root rw,errors=continue
//	ID PA MM:M ROOT  MOUNTPOINT  OPTIONS    OPTIONAL  - TYPE SOURCE    SUPER OPTIONS
type Mount struct {
	// ID is the mount's ID, unique within its mount namespace while mounted.
	ID int `json:"mount_id"`
	// ParentID is the parent mount's ID; for the namespace's root mount it
	// is the mount's own ID or one not visible in this namespace.
	ParentID int `json:"parent_id"`
	// Major and Minor are st_dev of files on this filesystem. For block
	// filesystems they name the block device (e.g. 252:0 for /dev/rbd0), so
	// every namespace still mounting a device can be found by them.
	Major uint32 `json:"major"`
	Minor uint32 `json:"minor"`
	// Root is the path within the filesystem that forms this mount's root:
	// "/" for a whole filesystem, a subdirectory for a bind mount, or e.g.
	// "net:[4026532281]" for a bind-mounted namespace file. Unescaped.
	Root string `json:"root"`
	// MountPoint is where the mount is, relative to the reading process's
	// root. Always starts with '/'. Unescaped.
	MountPoint string `json:"mount_point"`
	// Options are the per-mount options (rw, nosuid, relatime, ...). They
	// are kept as the kernel wrote them (not unescaped) so that an escaped
	// comma inside a value cannot split an option.
	Options []string `json:"options"`
	// Optional holds the optional fields as written, e.g. "shared:5",
	// "master:3"; Propagation is their parsed form.
	Optional []string `json:"optional,omitempty"`
	// Propagation is the mount's propagation type, parsed from Optional.
	Propagation Propagation `json:"propagation"`
	// FSType is the filesystem type, "type.subtype" for FUSE (e.g.
	// "fuse.ceph-fuse"). Unescaped.
	FSType string `json:"fs_type"`
	// Source is the mount source, e.g. "/dev/rbd3", "10.0.0.1:/export",
	// "none". It may be empty. Unescaped.
	Source string `json:"source"`
	// SuperOptions are the superblock options, comma separated, as written.
	SuperOptions string `json:"super_options"`
}

// Dev returns the device number as "major:minor", the form mountinfo,
// lsblk and /sys/dev/block use.
func (m Mount) Dev() string {
	return DevString(m.Major, m.Minor)
}

// DevString formats a device number as decimal "major:minor", the form
// mountinfo, lsblk and /sys/dev/block use.
func DevString(major, minor uint32) string {
	return strconv.FormatUint(uint64(major), 10) + ":" + strconv.FormatUint(uint64(minor), 10)
}

// HasOption reports whether opt is one of the per-mount options.
func (m Mount) HasOption(opt string) bool {
	for _, o := range m.Options {
		if o == opt {
			return true
		}
	}
	return false
}

// Propagation is a mount's propagation type (mount_namespaces(7)). A mount
// that is neither shared nor a slave is private: an unmount on the host does
// not reach it, which is how a container with the host root mounted kept an
// rbd device busy in incident 002.
type Propagation struct {
	// Shared is the peer group ID from "shared:N"; 0 if not shared.
	Shared int `json:"shared,omitempty"`
	// Master is the peer group ID from "master:N" this mount is a slave of;
	// 0 if it is not a slave.
	Master int `json:"master,omitempty"`
	// PropagateFrom is the peer group from "propagate_from:N": the closest
	// dominant peer group visible in this namespace, when the master is not.
	PropagateFrom int `json:"propagate_from,omitempty"`
	// Unbindable is set by the "unbindable" field.
	Unbindable bool `json:"unbindable,omitempty"`
}

// Private reports whether the mount neither shares nor receives
// propagation events.
func (p Propagation) Private() bool {
	return p.Shared == 0 && p.Master == 0
}

// String returns the propagation as mountinfo writes it ("shared:5
// master:3"), or "private" when there is none.
func (p Propagation) String() string {
	var parts []string
	if p.Shared != 0 {
		parts = append(parts, "shared:"+strconv.Itoa(p.Shared))
	}
	if p.Master != 0 {
		parts = append(parts, "master:"+strconv.Itoa(p.Master))
	}
	if p.PropagateFrom != 0 {
		parts = append(parts, "propagate_from:"+strconv.Itoa(p.PropagateFrom))
	}
	if p.Unbindable {
		parts = append(parts, "unbindable")
	}
	if len(parts) == 0 {
		return "private"
	}
	return strings.Join(parts, " ")
}

// Reasons a mountinfo line is rejected. Package-level values, so a file
// full of bad lines does not allocate an error per line.
var (
	errMountFields      = missing("mountinfo: fewer than 6 fields before the optional fields")
	errMountSeparator   = missing(`mountinfo: no " - " separator after the optional fields`)
	errMountFSType      = missing("mountinfo: no filesystem type after the separator")
	errMountSource      = missing("mountinfo: no source after the filesystem type")
	errMountSuper       = missing("mountinfo: no super options after the source")
	errMountID          = malformed("mountinfo: mount ID is not a decimal number")
	errMountParentID    = malformed("mountinfo: parent ID is not a decimal number")
	errMountDev         = malformed(`mountinfo: device is not "major:minor"`)
	errMountRoot        = malformed("mountinfo: empty root")
	errMountPoint       = malformed("mountinfo: mount point does not start with '/'")
	errMountOptions     = malformed("mountinfo: empty mount options")
	errMountEmptyFSType = malformed("mountinfo: empty filesystem type")
)

// ParseMountInfo parses /proc/<pid>/mountinfo. Lines it cannot parse are
// reported in bad, with their line number and the reason, and skipped; all
// other lines are returned in order. Blank lines are ignored.
//
// It is built for parsing thousands of these files: the input is copied into
// one string that every field of every Mount slices, and the Options and
// Optional slices of all mounts share a few backing arrays (each capped, so
// appending to one cannot overwrite another). Fields that carried an escape
// are the only other allocations.
func ParseMountInfo(data []byte) (mounts []Mount, bad []LineError) {
	if len(data) == 0 {
		return nil, nil
	}
	s := string(data)
	lines := countLines(s, minMountLine)
	mounts = make([]Mount, 0, lines)
	// Four per-mount options and one optional field is typical of a
	// container host; the slab grows if the guess is short.
	sl := stringSlab{buf: make([]string, 0, 5*lines)}
	var errs badLines
	for n := 1; s != ""; n++ {
		var line string
		line, s, _ = strings.Cut(s, "\n")
		if isBlank(line) {
			continue
		}
		m, err := parseMountLine(line, &sl)
		if err != nil {
			errs.add(n, line, err)
			continue
		}
		mounts = append(mounts, m)
	}
	return mounts, errs.result()
}

// minMountLine is the length of the shortest valid line,
// "1 1 0:0 / / o - t  ".
const minMountLine = 19

func parseMountLine(line string, sl *stringSlab) (Mount, error) {
	var m Mount
	// The first six fields are separated by single spaces; any space inside
	// a path is escaped, so splitting on ' ' is exact. Cutting (rather than
	// strings.Fields) keeps an empty field, such as an empty source, as one.
	var f [6]string
	rest := line
	for i := range f {
		var ok bool
		f[i], rest, ok = strings.Cut(rest, " ")
		if !ok && i < len(f)-1 {
			return m, errMountFields
		}
		if !ok {
			// The options field ended the line.
			return m, errMountSeparator
		}
	}

	// The numbers first: on a line of garbage, "mount ID is not a number"
	// is the most telling complaint.
	id, ok := parseUint(f[0], 10, math.MaxInt)
	if !ok {
		return m, errMountID
	}
	parent, ok := parseUint(f[1], 10, math.MaxInt)
	if !ok {
		return m, errMountParentID
	}
	maj, mnr, ok := strings.Cut(f[2], ":")
	if !ok {
		return m, errMountDev
	}
	major, ok1 := parseUint(maj, 10, math.MaxUint32)
	minor, ok2 := parseUint(mnr, 10, math.MaxUint32)
	if !ok1 || !ok2 {
		return m, errMountDev
	}

	// Optional fields run up to a field that is exactly "-". Root (f[3])
	// is already consumed, so a root such as "-" cannot be mistaken for it.
	opt := rest
	optLen, nopt := 0, 0
	for {
		fld, after, ok := strings.Cut(rest, " ")
		if fld == "-" {
			if !ok {
				return m, errMountFSType
			}
			rest = after
			break
		}
		if !ok {
			return m, errMountSeparator
		}
		if fld != "" {
			nopt++
		}
		optLen += len(fld) + 1
		rest = after
	}
	opt = opt[:max(optLen-1, 0)]

	fstype, rest, ok := strings.Cut(rest, " ")
	if !ok {
		return m, errMountSource
	}
	source, super, ok2 := strings.Cut(rest, " ")
	if !ok2 {
		return m, errMountSuper
	}

	if f[3] == "" {
		return m, errMountRoot
	}
	if f[5] == "" {
		return m, errMountOptions
	}
	m.MountPoint = unescapeOctal(f[4])
	if !strings.HasPrefix(m.MountPoint, "/") {
		return m, errMountPoint
	}
	m.FSType = unescapeOctal(fstype)
	if m.FSType == "" {
		return m, errMountEmptyFSType
	}

	m.ID = int(id)
	m.ParentID = int(parent)
	m.Major = uint32(major)
	m.Minor = uint32(minor)
	m.Root = unescapeOctal(f[3])
	m.Source = unescapeOctal(source)
	m.SuperOptions = super

	m.Options = sl.split(f[5], ",", strings.Count(f[5], ",")+1, false)
	if nopt > 0 {
		m.Optional = sl.split(opt, " ", nopt, true)
		m.Propagation = parsePropagation(m.Optional)
	}
	return m, nil
}

// parsePropagation reads the tags the kernel writes in the optional fields.
// A tag with an unparsable number is left in Optional and otherwise ignored:
// the rest of the line is still good evidence, and unknown tags are what
// the format promises future kernels may add.
func parsePropagation(optional []string) Propagation {
	var p Propagation
	for _, o := range optional {
		tag, val, _ := strings.Cut(o, ":")
		var dst *int
		switch tag {
		case "shared":
			dst = &p.Shared
		case "master":
			dst = &p.Master
		case "propagate_from":
			dst = &p.PropagateFrom
		case "unbindable":
			if o == "unbindable" {
				p.Unbindable = true
			}
			continue
		default:
			continue
		}
		if n, ok := parseUint(val, 10, math.MaxInt); ok {
			*dst = int(n)
		}
	}
	return p
}

// stringSlab hands out sub-slices of shared backing arrays, so that parsing
// a 5,000-line mountinfo costs a handful of allocations for all its option
// lists instead of two per line.
type stringSlab struct {
	buf []string
}

// split splits s at sep into parts, dropping empty ones if skipEmpty, and
// returns them as a slice whose capacity equals its length. n is the number
// of parts expected; a wrong n costs only an extra allocation.
func (sl *stringSlab) split(s, sep string, n int, skipEmpty bool) []string {
	if cap(sl.buf)-len(sl.buf) < n {
		sl.buf = make([]string, 0, max(n, 2*cap(sl.buf), 256))
	}
	start := len(sl.buf)
	for {
		part, rest, ok := strings.Cut(s, sep)
		if part != "" || !skipEmpty {
			sl.buf = append(sl.buf, part)
		}
		if !ok {
			break
		}
		s = rest
	}
	return sl.buf[start:len(sl.buf):len(sl.buf)]
}
