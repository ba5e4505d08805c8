package csi

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
)

// UnixSocket is one line of /proc/net/unix.
type UnixSocket struct {
	Inode uint64
	// Flags are the socket's flags (__SO_ACCEPTCON, 0x10000, on a
	// listening socket), Type SOCK_STREAM (1), SOCK_DGRAM (2) or
	// SOCK_SEQPACKET (5), State the kernel's socket state (1 unconnected,
	// 3 connected).
	Flags uint32
	Type  uint16
	State uint8
	// Path is the bound address as the binding process named it: a path
	// in its mount namespace, "@name" for an abstract socket, "" for an
	// unbound one.
	Path string
}

const soAcceptCon = 0x10000

// Listening reports whether the socket accepts connections.
func (s UnixSocket) Listening() bool { return s.Flags&soAcceptCon != 0 }

var errNetUnixLine = errors.New("not a /proc/net/unix line")

// ParseNetUnix parses /proc/net/unix. Lines it cannot read are counted
// in bad and skipped: one odd line does not hide the others.
//
//	Num       RefCount Protocol Flags    Type St Inode Path
//	0000000000000000: 00000002 00000000 00010000 0001 01 23817 /run/csi.sock
func ParseNetUnix(data []byte) (socks []UnixSocket, bad int) {
	for len(data) > 0 {
		var line []byte
		line, data, _ = bytes.Cut(data, []byte("\n"))
		if len(bytes.TrimSpace(line)) == 0 || bytes.HasPrefix(line, []byte("Num")) {
			continue
		}
		s, err := parseNetUnixLine(line)
		if err != nil {
			bad++
			continue
		}
		socks = append(socks, s)
	}
	return socks, bad
}

func parseNetUnixLine(line []byte) (UnixSocket, error) {
	var f [7][]byte
	rest := line
	for i := range f {
		rest = bytes.TrimLeft(rest, " ")
		end := bytes.IndexByte(rest, ' ')
		if end < 0 {
			end = len(rest)
		}
		f[i], rest = rest[:end], rest[end:]
		if len(f[i]) == 0 {
			return UnixSocket{}, errNetUnixLine
		}
	}
	if !bytes.HasSuffix(f[0], []byte(":")) {
		return UnixSocket{}, errNetUnixLine
	}
	flags, err := strconv.ParseUint(string(f[3]), 16, 32)
	if err != nil {
		return UnixSocket{}, fmt.Errorf("flags: %w", err)
	}
	typ, err := strconv.ParseUint(string(f[4]), 16, 16)
	if err != nil {
		return UnixSocket{}, fmt.Errorf("type: %w", err)
	}
	st, err := strconv.ParseUint(string(f[5]), 16, 8)
	if err != nil {
		return UnixSocket{}, fmt.Errorf("state: %w", err)
	}
	ino, err := strconv.ParseUint(string(f[6]), 10, 64)
	if err != nil {
		return UnixSocket{}, fmt.Errorf("inode: %w", err)
	}
	// The path is the rest after one space; it may itself hold spaces.
	p := string(bytes.TrimPrefix(rest, []byte(" ")))
	return UnixSocket{Inode: ino, Flags: uint32(flags), Type: uint16(typ), State: uint8(st), Path: p}, nil
}
