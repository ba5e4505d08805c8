package procfs

import (
	"bytes"
	"fmt"
	"math"
	"runtime"
	"strconv"
	"strings"
)

// FDInfo is the common part of /proc/<pid>/fdinfo/<fd>. The per-type lines
// that follow it (eventfd-count, tfd, inotify, lock, ...) are ignored.
type FDInfo struct {
	// Pos is the file offset.
	Pos int64 `json:"pos"`
	// Flags are the open(2) flags of the file, O_CLOEXEC included when the
	// descriptor has it; the kernel writes them in octal.
	Flags int `json:"flags"`
	// MntID is the ID of the mount the file is on, matching Mount.ID in
	// the same namespace's mountinfo; -1 when the kernel does not write it
	// (before Linux 3.15).
	MntID int `json:"mnt_id"`
	// Ino is the file's inode number; 0 when the kernel does not write it
	// (before Linux 5.14).
	Ino uint64 `json:"ino,omitempty"`
}

// FlagsString returns Flags as O_* names, e.g. "O_RDWR|O_CLOEXEC", with the
// flag values of the architecture this program runs on. ParseFDInfo runs
// on the node that wrote the file, so that is normally right; code
// decoding a bundle elsewhere should use FormatOpenFlags with the node's
// architecture.
func (f FDInfo) FlagsString() string {
	return FormatOpenFlags(f.Flags, runtime.GOARCH)
}

// openFlag is one O_* bit (or pair of bits) with its name.
type openFlag struct {
	bits int
	name string
}

// Kernel-internal values, which differ from userspace's for O_LARGEFILE:
// 64-bit kernels set it on every open file, userspace defines it as 0.
// The multi-bit flags (O_SYNC = __O_SYNC|O_DSYNC, O_TMPFILE =
// __O_TMPFILE|O_DIRECTORY) come first so their bits are claimed whole.
var (
	// asm-generic/fcntl.h: x86, riscv, s390, loongarch.
	genericOpenFlags = []openFlag{
		{04010000, "O_SYNC"}, {020200000, "O_TMPFILE"},
		{0100, "O_CREAT"}, {0200, "O_EXCL"}, {0400, "O_NOCTTY"}, {01000, "O_TRUNC"},
		{02000, "O_APPEND"}, {04000, "O_NONBLOCK"}, {010000, "O_DSYNC"},
		{020000, "O_ASYNC"}, {040000, "O_DIRECT"}, {0100000, "O_LARGEFILE"},
		{0200000, "O_DIRECTORY"}, {0400000, "O_NOFOLLOW"}, {01000000, "O_NOATIME"},
		{02000000, "O_CLOEXEC"}, {010000000, "O_PATH"},
	}
	// arch/arm64/include/uapi/asm/fcntl.h (and arm): four bits move.
	armOpenFlags = []openFlag{
		{04010000, "O_SYNC"}, {020040000, "O_TMPFILE"},
		{0100, "O_CREAT"}, {0200, "O_EXCL"}, {0400, "O_NOCTTY"}, {01000, "O_TRUNC"},
		{02000, "O_APPEND"}, {04000, "O_NONBLOCK"}, {010000, "O_DSYNC"},
		{020000, "O_ASYNC"}, {040000, "O_DIRECTORY"}, {0100000, "O_NOFOLLOW"},
		{0200000, "O_DIRECT"}, {0400000, "O_LARGEFILE"}, {01000000, "O_NOATIME"},
		{02000000, "O_CLOEXEC"}, {010000000, "O_PATH"},
	}
	// arch/powerpc/include/uapi/asm/fcntl.h: the same four, differently.
	powerpcOpenFlags = []openFlag{
		{04010000, "O_SYNC"}, {020040000, "O_TMPFILE"},
		{0100, "O_CREAT"}, {0200, "O_EXCL"}, {0400, "O_NOCTTY"}, {01000, "O_TRUNC"},
		{02000, "O_APPEND"}, {04000, "O_NONBLOCK"}, {010000, "O_DSYNC"},
		{020000, "O_ASYNC"}, {040000, "O_DIRECTORY"}, {0100000, "O_NOFOLLOW"},
		{0200000, "O_LARGEFILE"}, {0400000, "O_DIRECT"}, {01000000, "O_NOATIME"},
		{02000000, "O_CLOEXEC"}, {010000000, "O_PATH"},
	}
)

// FormatOpenFlags names the open(2) flags in flags for the architecture
// goarch (a GOARCH value such as "amd64" or "arm64"): the access mode
// first, then each set flag, then any bits left over in octal, joined by
// '|' ("O_WRONLY|O_APPEND|O_LARGEFILE"). On an architecture whose flag
// values it does not know (mips, sparc, ...) it names only the access mode
// and writes the rest in octal rather than guess.
func FormatOpenFlags(flags int, goarch string) string {
	var table []openFlag
	switch goarch {
	case "amd64", "386", "riscv64", "s390x", "loong64":
		table = genericOpenFlags
	case "arm64", "arm":
		table = armOpenFlags
	case "ppc64", "ppc64le":
		table = powerpcOpenFlags
	}
	var b strings.Builder
	switch flags & 3 {
	case 0:
		b.WriteString("O_RDONLY")
	case 1:
		b.WriteString("O_WRONLY")
	case 2:
		b.WriteString("O_RDWR")
	case 3:
		// Not an access mode open(2) accepts from users; the kernel
		// uses it for ioctl-only opens. Keep the bits visible.
		b.WriteString("03")
	}
	left := flags &^ 3
	for _, f := range table {
		if left&f.bits == f.bits {
			b.WriteString("|" + f.name)
			left &^= f.bits
		}
	}
	if left != 0 {
		b.WriteString("|0" + strconv.FormatUint(uint64(uint(left)), 8))
	}
	return b.String()
}

// ParseFDInfo parses /proc/<pid>/fdinfo/<fd>. pos: and flags: are
// required; mnt_id: and ino: are read when present.
func ParseFDInfo(data []byte) (FDInfo, error) {
	fi := FDInfo{MntID: -1}
	if isBlank(data) {
		return fi, fmt.Errorf("%w: fdinfo", ErrEmpty)
	}
	havePos, haveFlags := false, false
	for rest := data; len(rest) > 0; {
		var line []byte
		line, rest, _ = bytes.Cut(rest, []byte("\n"))
		key, val, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		val = trimSpace(val)
		switch string(key) {
		case "pos":
			// %lld: negative offsets exist for some device files.
			n, ok := parseInt64(val)
			if !ok {
				return fi, malformed("fdinfo: pos is not a decimal number")
			}
			fi.Pos, havePos = n, true
		case "flags":
			n, ok := parseUint(val, 8, math.MaxInt32)
			if !ok {
				return fi, malformed("fdinfo: flags is not an octal number")
			}
			fi.Flags, haveFlags = int(n), true
		case "mnt_id":
			n, ok := parseUint(val, 10, math.MaxInt32)
			if !ok {
				return fi, malformed("fdinfo: mnt_id is not a decimal number")
			}
			fi.MntID = int(n)
		case "ino":
			n, ok := parseUint(val, 10, math.MaxUint64)
			if !ok {
				return fi, malformed("fdinfo: ino is not a decimal number")
			}
			fi.Ino = n
		}
	}
	if !havePos || !haveFlags {
		return fi, missing("fdinfo: no pos: or flags: line")
	}
	return fi, nil
}
