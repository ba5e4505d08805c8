package procfs

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseMapsFixture(t *testing.T) {
	entries, bad := ParseMaps(readFixture(t, "maps", "python.txt"))
	if len(bad) != 0 {
		t.Fatalf("bad lines: %v", bad)
	}
	if len(entries) != 114 {
		t.Fatalf("got %d entries, want 114", len(entries))
	}
	byPath := map[string]MapEntry{}
	for _, e := range entries {
		byPath[e.Pathname] = e
	}
	tests := []struct {
		path    string
		want    MapEntry
		isFile  bool
		decimal string
	}{{
		path: "/tmp/mapdir/with space/data file.bin", isFile: true, decimal: "254:0",
		want: MapEntry{Start: 0x7fa51a315000, End: 0x7fa51a317000, Perms: "rw-s", Major: 0xfe,
			Inode: 9981486, Pathname: "/tmp/mapdir/with space/data file.bin"},
	}, {
		path: "/tmp/mapdir/gone.bin", isFile: true, decimal: "254:0",
		want: MapEntry{Start: 0x7fa5196c4000, End: 0x7fa5196c6000, Perms: "rw-s", Major: 0xfe,
			Inode: 9981487, Pathname: "/tmp/mapdir/gone.bin", Deleted: true},
	}, {
		path: "/tmp/mapdir/new\nline.bin", isFile: true, decimal: "254:0",
		want: MapEntry{Start: 0x7fa51969d000, End: 0x7fa51969f000, Perms: "rw-s", Major: 0xfe,
			Inode: 9981488, Pathname: "/tmp/mapdir/new\nline.bin"},
	}, {
		path: "/memfd:jit-cache", isFile: true, decimal: "0:1",
		want: MapEntry{Start: 0x7fa51a1ba000, End: 0x7fa51a1bb000, Perms: "rw-s", Minor: 1,
			Inode: 25, Pathname: "/memfd:jit-cache", Deleted: true},
	}, {
		path: "[vsyscall]", decimal: "0:0",
		want: MapEntry{Start: 0xffffffffff600000, End: 0xffffffffff601000, Perms: "--xp", Pathname: "[vsyscall]"},
	}}
	for _, tt := range tests {
		got, ok := byPath[tt.path]
		if !ok {
			t.Errorf("%q: not parsed", tt.path)
			continue
		}
		if got != tt.want {
			t.Errorf("%q:\ngot  %+v\nwant %+v", tt.path, got, tt.want)
		}
		if got.IsFile() != tt.isFile || got.Dev() != tt.decimal {
			t.Errorf("%q: IsFile %v Dev %q, want %v %q", tt.path, got.IsFile(), got.Dev(), tt.isFile, tt.decimal)
		}
	}
	anon := 0
	for _, e := range entries {
		if e.Pathname == "" {
			anon++
			if e.Inode != 0 || e.IsFile() {
				t.Errorf("anonymous mapping with inode: %+v", e)
			}
		}
	}
	if anon != 7 {
		t.Errorf("%d anonymous mappings, want 7", anon)
	}
}

func TestParseMapsLines(t *testing.T) {
	tests := []struct {
		name, in string
		want     MapEntry
	}{
		{"anonymous without trailing space", "00400000-00401000 rw-p 00000000 00:00 0",
			MapEntry{Start: 0x400000, End: 0x401000, Perms: "rw-p"}},
		{"named anonymous memory", "7f0000000000-7f0000001000 rw-p 00000000 00:00 0                          [anon:go-heap]",
			MapEntry{Start: 0x7f0000000000, End: 0x7f0000001000, Perms: "rw-p", Pathname: "[anon:go-heap]"}},
		{"large minor and offset", "1000-2000 r--s 1fffff000 103:1a0 77 /dev/nvme0n1p9",
			MapEntry{Start: 0x1000, End: 0x2000, Perms: "r--s", Offset: 0x1fffff000, Major: 0x103, Minor: 0x1a0, Inode: 77, Pathname: "/dev/nvme0n1p9"}},
		{"a literal backslash is not an escape", `1000-2000 r--p 00000000 08:01 5 /opt/a\134b\012c`,
			MapEntry{Start: 0x1000, End: 0x2000, Perms: "r--p", Major: 8, Minor: 1, Inode: 5, Pathname: "/opt/a\\134b\nc"}},
		{"a deleted file whose name ends in (deleted)", "1000-2000 r--p 00000000 08:01 5  /x (deleted) (deleted)",
			MapEntry{Start: 0x1000, End: 0x2000, Perms: "r--p", Major: 8, Minor: 1, Inode: 5, Pathname: "/x (deleted)", Deleted: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, bad := ParseMaps([]byte(tt.in))
			if len(bad) != 0 || len(got) != 1 {
				t.Fatalf("got %v, bad %v", got, bad)
			}
			if got[0] != tt.want {
				t.Errorf("got  %+v\nwant %+v", got[0], tt.want)
			}
		})
	}
}

func TestParseMapsBadLines(t *testing.T) {
	tests := []struct{ name, in, reason string }{
		{"garbage", "hello", "fewer than 5"},
		{"four fields", "1000-2000 r--p 00000000 08:01", "fewer than 5"},
		{"double space in fixed fields", "1000-2000  r--p 00000000 08:01 5", "fewer than 5"},
		{"no dash", "10002000 r--p 00000000 08:01 5", "address range"},
		{"not hex", "1000-20g0 r--p 00000000 08:01 5", "address range"},
		{"end below start", "2000-1000 r--p 00000000 08:01 5", "not above"},
		{"empty range", "2000-2000 r--p 00000000 08:01 5", "not above"},
		{"perms", "1000-2000 rwxa 00000000 08:01 5", "permissions"},
		{"perms length", "1000-2000 rw 00000000 08:01 5", "permissions"},
		{"offset", "1000-2000 r--p 0000z000 08:01 5", "offset"},
		{"device", "1000-2000 r--p 00000000 0801 5", "device"},
		{"inode", "1000-2000 r--p 00000000 08:01 -5", "inode"},
		{"address overflow", "10000000000000000-10000000000000001 r--p 00000000 08:01 5", "address range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, bad := ParseMaps([]byte(tt.in))
			if len(got) != 0 || len(bad) != 1 {
				t.Fatalf("got %v, bad %v", got, bad)
			}
			if !errors.Is(bad[0], ErrMalformed) || !strings.Contains(bad[0].Error(), tt.reason) {
				t.Errorf("error %q, want one wrapping ErrMalformed saying %q", bad[0], tt.reason)
			}
		})
	}
}

func TestParseMapsKeepsGoodLines(t *testing.T) {
	in := "1000-2000 r--p 00000000 08:01 5 /a\nbroken\n\n3000-4000 r--p 00000000 08:01 6 /b\n"
	got, bad := ParseMaps([]byte(in))
	var paths []string
	for _, e := range got {
		paths = append(paths, e.Pathname)
	}
	if !reflect.DeepEqual(paths, []string{"/a", "/b"}) || len(bad) != 1 || bad[0].Line != 2 {
		t.Errorf("paths %q, bad %v", paths, bad)
	}
}
