package storageclients

import "testing"

// The kernel's files are read as bytes from a node nobody here controls
// (and, through a bundle, from anyone): no input may make a parser panic
// or keep more than its bound.

func FuzzParseMountstats(f *testing.F) {
	f.Add(fixture(f, "mountstats-procfs.txt"))
	f.Add([]byte("device a:/b mounted on /c with fstype nfs statvers=1.1\n\txprt:\tudp 1 2 3\n\tper-op statistics\n\tREAD: 1 2 3 4 5 6 7 8 9\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, m := range ParseMountstats(b) {
			if len(m.Ops) > 256 {
				t.Fatalf("%d ops kept", len(m.Ops))
			}
		}
	})
}

func FuzzParseRPCTasks(f *testing.F) {
	f.Add(fixture(f, "rpc-tasks-pending.txt"))
	f.Fuzz(func(t *testing.T, b []byte) { _ = ParseRPCTasks(b) })
}

func FuzzParseNFSFS(f *testing.F) {
	f.Add([]byte("NV SERVER   PORT USE HOSTNAME\nv4 0a000005  801   2 10.0.0.5\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = ParseNFSServers(b)
		_ = ParseNFSVolumes(b)
		_ = ParseKeyValues(b)
	})
}

func FuzzParseCeph(f *testing.F) {
	f.Add(fixture(f, "osdc-stuck-writes.txt"))
	f.Add(fixture(f, "osdc-rbd.txt"))
	f.Add(fixture(f, "mdsc.txt"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if n := len(ParseCephOSDC(b)); n > maxRecords {
			t.Fatalf("%d requests kept", n)
		}
		_ = ParseCephMDSC(b)
		_ = lines(b, 8)
	})
}

func FuzzParseBlock(f *testing.F) {
	f.Add(fixture(f, "block-stat-sda.txt"))
	f.Add(fixture(f, "block-inflight-sdv.txt"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = ParseBlockStat(b)
		_, _ = ParseInflight(b)
		_, _ = ParseDev(b)
		_ = unescapeOctal(string(b))
	})
}
