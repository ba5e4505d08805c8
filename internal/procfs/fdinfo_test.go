package procfs

import (
	"errors"
	"testing"
)

func TestParseFDInfo(t *testing.T) {
	tests := []struct {
		name, in string
		want     FDInfo
		flags    string // FormatOpenFlags for amd64
	}{{
		name:  "regular file",
		in:    "pos:\t4096\nflags:\t02100002\nmnt_id:\t29\nino:\t1311\n",
		want:  FDInfo{Pos: 4096, Flags: 02100002, MntID: 29, Ino: 1311},
		flags: "O_RDWR|O_LARGEFILE|O_CLOEXEC",
	}, {
		name:  "eventfd with its own lines",
		in:    "pos:\t0\nflags:\t02004002\nmnt_id:\t15\nino:\t1057\neventfd-count:                0\neventfd-id: 3\n",
		want:  FDInfo{Flags: 02004002, MntID: 15, Ino: 1057},
		flags: "O_RDWR|O_NONBLOCK|O_CLOEXEC",
	}, {
		name:  "inotify with watch lines that hold colons",
		in:    "pos:\t0\nflags:\t02004000\nmnt_id:\t15\nino:\t1057\ninotify wd:1 ino:2 sdev:800001 mask:fce ignored_mask:0 fhandle-bytes:8 fhandle-type:1 f_handle:02000000\n",
		want:  FDInfo{Flags: 02004000, MntID: 15, Ino: 1057},
		flags: "O_RDONLY|O_NONBLOCK|O_CLOEXEC",
	}, {
		name:  "old kernel: no mnt_id, no ino",
		in:    "pos:\t12\nflags:\t01\n",
		want:  FDInfo{Pos: 12, Flags: 1, MntID: -1},
		flags: "O_WRONLY",
	}, {
		name:  "append, sync, directory, path, tmpfile",
		in:    "pos:\t0\nflags:\t024212000\nmnt_id:\t1\n",
		want:  FDInfo{Flags: 024212000, MntID: 1},
		flags: "O_RDONLY|O_SYNC|O_TMPFILE|O_APPEND",
	}, {
		name:  "unknown bits are kept in octal",
		in:    "pos:\t0\nflags:\t0400000001\nmnt_id:\t1\n",
		want:  FDInfo{Flags: 0400000001, MntID: 1},
		flags: "O_WRONLY|0400000000",
	}, {
		name:  "a lock line and a negative pos",
		in:    "pos:\t-1\nflags:\t0100000\nmnt_id:\t24\nino:\t3\nlock:\t1: POSIX  ADVISORY  WRITE 12345 fd:01:1311 0 EOF\n",
		want:  FDInfo{Pos: -1, Flags: 0100000, MntID: 24, Ino: 3},
		flags: "O_RDONLY|O_LARGEFILE",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseFDInfo([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
			if s := FormatOpenFlags(got.Flags, "amd64"); s != tt.flags {
				t.Errorf("FormatOpenFlags = %q, want %q", s, tt.flags)
			}
		})
	}
}

func TestFormatOpenFlagsArch(t *testing.T) {
	tests := []struct {
		flags  int
		goarch string
		want   string
	}{
		// O_LARGEFILE (set on every 64-bit open) and O_DIRECTORY differ
		// between x86 and arm64: the same octal means different flags.
		{0100000, "amd64", "O_RDONLY|O_LARGEFILE"},
		{0400000, "arm64", "O_RDONLY|O_LARGEFILE"},
		{0200000, "ppc64le", "O_RDONLY|O_LARGEFILE"},
		{02440000, "arm64", "O_RDONLY|O_DIRECTORY|O_LARGEFILE|O_CLOEXEC"},
		{02340000, "amd64", "O_RDONLY|O_DIRECT|O_LARGEFILE|O_DIRECTORY|O_CLOEXEC"},
		{0440002, "ppc64", "O_RDWR|O_DIRECTORY|O_DIRECT"},
		{02100002, "mips64", "O_RDWR|02100000"},
		{3, "amd64", "03"},
	}
	for _, tt := range tests {
		if got := FormatOpenFlags(tt.flags, tt.goarch); got != tt.want {
			t.Errorf("FormatOpenFlags(0%o, %s) = %q, want %q", tt.flags, tt.goarch, got, tt.want)
		}
	}
}

func TestParseFDInfoErrors(t *testing.T) {
	tests := []struct {
		name, in string
		want     error
	}{
		{"empty", "", ErrEmpty},
		{"no flags", "pos:\t0\nmnt_id:\t1\n", ErrMissingField},
		{"no pos", "flags:\t02\n", ErrMissingField},
		{"flags not octal", "pos:\t0\nflags:\t089\n", ErrMalformed},
		{"pos not a number", "pos:\tzero\nflags:\t02\n", ErrMalformed},
		{"mnt_id not a number", "pos:\t0\nflags:\t02\nmnt_id:\t-\n", ErrMalformed},
		{"ino not a number", "pos:\t0\nflags:\t02\nino:\t0x10\n", ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := ParseFDInfo([]byte(tt.in)); !errors.Is(err, tt.want) {
				t.Errorf("err = %v, want %v", err, tt.want)
			}
		})
	}
}
