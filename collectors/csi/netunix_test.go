package csi_test

import (
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/collectors/csi"
)

func TestParseNetUnix(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want []csi.UnixSocket
		bad  int
	}{
		{"header only", "Num       RefCount Protocol Flags    Type St Inode Path\n", nil, 0},
		{"listening csi socket",
			"Num       RefCount Protocol Flags    Type St Inode Path\n" +
				"0000000000000000: 00000002 00000000 00010000 0001 01 23817 /var/lib/kubelet/plugins/hostpath.csi.k8s.io/csi.sock\n",
			[]csi.UnixSocket{{Inode: 23817, Flags: 0x10000, Type: 1, State: 1, Path: "/var/lib/kubelet/plugins/hostpath.csi.k8s.io/csi.sock"}}, 0},
		{"connected, unbound, abstract, a path with spaces",
			"0000000000000000: 00000003 00000000 00000000 0001 03 40001\n" +
				"0000000000000000: 00000002 00000000 00010000 0001 01 40002 @/containerd-shim/abc.sock@\n" +
				"0000000000000000: 00000002 00000000 00010000 0005 01 40003 /run/a b.sock",
			[]csi.UnixSocket{
				{Inode: 40001, Type: 1, State: 3},
				{Inode: 40002, Flags: 0x10000, Type: 1, State: 1, Path: "@/containerd-shim/abc.sock@"},
				{Inode: 40003, Flags: 0x10000, Type: 5, State: 1, Path: "/run/a b.sock"},
			}, 0},
		{"bad lines are skipped and counted",
			"garbage\n0000000000000000: 00000002 00000000 zz 0001 01 1 /x\n" +
				"0000000000000000: 00000002 00000000 00000000 0001 01 -5 /y\n" +
				"0000000000000000 00000002 00000000 00000000 0001 01 5 /z\n" +
				"0000000000000000: 00000002 00000000 00000000 0001 01 7 /ok\n",
			[]csi.UnixSocket{{Inode: 7, Type: 1, State: 1, Path: "/ok"}}, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, bad := csi.ParseNetUnix([]byte(tc.in))
			if bad != tc.bad {
				t.Errorf("bad lines %d, want %d", bad, tc.bad)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("socket %d: %+v, want %+v", i, got[i], tc.want[i])
				}
			}
			for _, s := range got {
				if s.Listening() != (s.Flags&0x10000 != 0) {
					t.Errorf("%+v: Listening %v", s, s.Listening())
				}
			}
		})
	}
}

func FuzzParseNetUnix(f *testing.F) {
	f.Add([]byte("Num       RefCount Protocol Flags    Type St Inode Path\n0000000000000000: 00000002 00000000 00010000 0001 01 23817 /run/csi.sock\n"))
	f.Add([]byte("0000000000000000: 00000003 00000000 00000000 0001 03 40001\n"))
	f.Add([]byte("0: 1 2 3 4 5 6  \n\n:"))
	f.Fuzz(func(t *testing.T, data []byte) {
		socks, bad := csi.ParseNetUnix(data)
		lines := strings.Count(string(data), "\n") + 1
		if len(socks)+bad > lines {
			t.Fatalf("%d sockets and %d bad lines from %d lines", len(socks), bad, lines)
		}
		for _, s := range socks {
			if strings.Contains(s.Path, "\n") {
				t.Fatalf("path %q holds a newline", s.Path)
			}
		}
	})
}
