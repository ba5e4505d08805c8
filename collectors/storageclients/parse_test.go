package storageclients

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/nodesnap/nodesnap/bundle/layout"
)

// fixture reads a testdata file without its header (the "# " lines up
// to "---", which say where the capture comes from).
func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	if i := bytes.Index(b, []byte("\n---\n")); i >= 0 && bytes.HasPrefix(b, []byte("# ")) {
		b = b[i+5:]
	}
	return b
}

func TestParseMountstats(t *testing.T) {
	tests := []struct {
		name  string
		in    []byte
		check func(t *testing.T, ms []layout.NFSMount)
	}{{
		name: "procfs capture: one NFSv4 mount among local ones",
		in:   fixture(t, "mountstats-procfs.txt"),
		check: func(t *testing.T, ms []layout.NFSMount) {
			if len(ms) != 1 {
				t.Fatalf("got %d mounts, want 1", len(ms))
			}
			m := ms[0]
			if m.Server != "192.168.1.1" || m.Export != "/srv/test" || m.Mountpoint != "/mnt/nfs/test" || m.FSType != "nfs4" || m.StatVers != "1.1" {
				t.Errorf("identity: %+v", m)
			}
			if m.AgeSeconds != 13968 || m.Opts["timeo"] != "600" || m.Opts["proto"] != "tcp" || m.Opts["hard"] != "" {
				t.Errorf("age/opts: %d %v", m.AgeSeconds, m.Opts)
			}
			x := m.Xprt
			if x == nil || x.Proto != "tcp" || x.Port != 832 || x.Connects != 1 || x.Sends != 6428 || x.Receives != 6428 || x.CumBacklog != 0 || x.MaxSlots != 24 || x.InFlight != 0 {
				t.Errorf("xprt: %+v", x)
			}
			if len(m.Ops) != 4 || m.Ops[1].Name != "READ" || m.Ops[1].Ops != 1298 || m.Ops[1].RTTMS != 79386 || m.Ops[1].ExecuteMS != 79407 {
				t.Errorf("ops: %+v", m.Ops)
			}
			// ACCESS retransmitted 12 times (2927395007 ops, 2927394995 transmissions: fewer, so none counted).
			if m.RPCs != 1298+2927395007 || m.Timeouts != 0 {
				t.Errorf("totals: rpcs %d timeouts %d retrans %d", m.RPCs, m.Timeouts, m.Retransmits)
			}
		},
	}, {
		name: "documented format: a stuck server, escaped mountpoint, statvers 1.1 udp",
		in: []byte("device 10.0.0.5:/exports/a\\040b mounted on /var/lib/kubelet/pods/x/volumes/kubernetes.io~nfs/pv\\040a with fstype nfs statvers=1.1\n" +
			"\topts:\trw,vers=3,hard,proto=udp\n\tage:\t900\n" +
			"\txprt:\tudp 0 1 500 463 0 900 40 16 3 4\n" +
			"\tper-op statistics\n\t        NULL: 0 0 0 0 0 0 0 0\n\t     GETATTR: 40 77 3 0 0 1 2 3 0\n"),
		check: func(t *testing.T, ms []layout.NFSMount) {
			if len(ms) != 1 {
				t.Fatalf("got %d", len(ms))
			}
			m := ms[0]
			if m.Export != "/exports/a b" || m.Mountpoint != "/var/lib/kubelet/pods/x/volumes/kubernetes.io~nfs/pv a" {
				t.Errorf("unescaping: %q %q", m.Export, m.Mountpoint)
			}
			if x := m.Xprt; x == nil || x.Proto != "udp" || x.Sends != 500 || x.Receives != 463 || x.InFlight != 37 || x.CumBacklog != 40 {
				t.Errorf("udp xprt: %+v", m.Xprt)
			}
			if m.Retransmits != 37 || m.Timeouts != 3 || !m.Ops[1].ErrorsKnown {
				t.Errorf("retrans %d timeouts %d ops %+v", m.Retransmits, m.Timeouts, m.Ops)
			}
		},
	}, {
		name:  "garbage",
		in:    []byte("device\nxprt: tcp\nper-op statistics\nREAD: x"),
		check: func(t *testing.T, ms []layout.NFSMount) { requireLen(t, ms, 0) },
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.check(t, ParseMountstats(tt.in)) })
	}
}

func requireLen[T any](t *testing.T, s []T, n int) {
	t.Helper()
	if len(s) != n {
		t.Fatalf("got %d records, want %d: %+v", len(s), n, s)
	}
}

func TestParseNFSServersVolumes(t *testing.T) {
	// The formats of nfs_server_list_show and nfs_volume_list_show
	// (fs/nfs/client.c).
	servers := []byte("NV SERVER   PORT USE HOSTNAME\nv4 0a000005  801   2 10.0.0.5\nv3 c0a80101  801   1 nas.example\n")
	got := ParseNFSServers(servers)
	want := []layout.NFSServer{{Version: "v4", ServerID: "0a000005", Port: "801", Use: 2, Hostname: "10.0.0.5"},
		{Version: "v3", ServerID: "c0a80101", Port: "801", Use: 1, Hostname: "nas.example"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("servers: %+v", got)
	}
	vols := []byte("NV SERVER   PORT DEV          FSID                              FSC\nv4 0a000005  801 0:52         1:0                               no\n")
	gv := ParseNFSVolumes(vols)
	if len(gv) != 1 || gv[0].Dev != "0:52" || gv[0].FSID != "1:0" || gv[0].FSCache != "no" {
		t.Errorf("volumes: %+v", gv)
	}
	requireLen(t, ParseNFSServers([]byte("v4 x\nNV SERVER\n")), 0)
}

func TestParseRPCTasks(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want []layout.RPCTask
	}{{
		name: "capture: two READs waiting for the reply",
		in:   fixture(t, "rpc-tasks-pending.txt"),
		want: []layout.RPCTask{
			{PID: 44224, Flags: "c801", ClientID: "8c478d70", XID: "2473aa3b", TimeoutJ: 15395, Ops: "8531859", Program: "nfsv4", Procedure: "READ", Action: "call_status", Queue: "xprt_pending"},
			{PID: 44225, Flags: "c801", ClientID: "8c478d70", XID: "a7d3b9b8", TimeoutJ: 15395, Ops: "8531859", Program: "nfsv4", Procedure: "READ", Action: "call_status", Queue: "xprt_pending"},
		},
	}, {
		name: "debugfs tasks_show: ops symbol with its module, status -11",
		in:   []byte("  412 0880    -11 0x5 0x8a2f10c3    60000 nfs_pgio_common_ops [nfs] nfsv3 WRITE a:call_connect_status [sunrpc] q:xprt_sending\n"),
		want: []layout.RPCTask{{PID: 412, Flags: "0880", Status: -11, ClientID: "0x5", XID: "0x8a2f10c3", TimeoutJ: 60000, Ops: "nfs_pgio_common_ops", Program: "nfsv3", Procedure: "WRITE", Action: "call_connect_status", Queue: "xprt_sending"}},
	}, {
		name: "header and short lines",
		in:   []byte("-pid- flgs status -client- --rqstp- -timeout ---ops--\n1 2 3\n"),
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ParseRPCTasks(tt.in); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestParseCephOSDC(t *testing.T) {
	got := ParseCephOSDC(fixture(t, "osdc-stuck-writes.txt"))
	requireLen(t, got, 13)
	perOSD := map[int]int{}
	for _, r := range got {
		perOSD[r.OSD]++
		if r.Ops != "write" || r.Attempts != 1 || r.Linger {
			t.Errorf("request %+v", r)
		}
	}
	if !reflect.DeepEqual(perOSD, map[int]int{2: 1, 5: 3, 7: 2, 8: 3, 11: 1, 12: 3}) {
		t.Errorf("per OSD: %v", perOSD)
	}
	if r := got[4]; r.TID != 204 || r.OSD != 7 || r.PG != "1.4dbcd0b2" || r.Object != "10000000017.00000001" {
		t.Errorf("request 204: %+v", r)
	}
	rbd := ParseCephOSDC(fixture(t, "osdc-rbd.txt"))
	requireLen(t, rbd, 1)
	if r := rbd[0]; r.TID != 8141767 || r.OSD != 807 || r.Object != "rbd_data.39.380eda51faf086.0000000000076984" || r.Attempts != 1 || r.Ops != "write" {
		t.Errorf("rbd request: %+v", r)
	}
	// Paused, replay version (4.x kernels), linger section.
	in := []byte("REQUESTS 1 homeless 1\n7\tosd3\t2.5\t[3,1]/3\t[3,1]/3\tobj\t0x24\tP\t4\t0'0\tread\nLINGER REQUESTS\n18446462598732840961\tosd1\t2.9\t[1]/1\t[1]/1\trbd_header.ab\t0x24\t0\tWC/0\n")
	got = ParseCephOSDC(in)
	requireLen(t, got, 2)
	if r := got[0]; !r.Paused || r.Attempts != 4 || r.Ops != "read" || r.Object != "obj" {
		t.Errorf("paused request: %+v", r)
	}
	if !got[1].Linger || got[1].OSD != 1 {
		t.Errorf("linger: %+v", got[1])
	}
}

func TestParseCephMDSC(t *testing.T) {
	got := ParseCephMDSC(fixture(t, "mdsc.txt"))
	want := []layout.CephMDSRequest{{TID: 3923, MDS: 0, Op: "readdir"}, {TID: 8317, MDS: -1, Op: "getattr"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v", got)
	}
	// fs/ceph/debugfs.c: "(no session)", "(unsafe)" and a dentry path.
	got = ParseCephMDSC([]byte("12\tmds1\tcreate\t(unsafe)\t #1/a (volumes/x/a)\n13\t(no session)\tlookup\t\n14\tmdsX\tgetattr\t\n"))
	if len(got) != 2 || got[0].MDS != 1 || got[0].Path != "#1/a (volumes/x/a)" || got[1].MDS != -1 {
		t.Errorf("got %+v", got)
	}
}

func TestParseBlock(t *testing.T) {
	st, ok := ParseBlockStat(fixture(t, "block-stat-sda.txt"))
	if !ok || len(st) != 15 || st[statReadIOs] != 9652963 || st[statWriteIOs] != 8422549 || completions(st) != 9652963+8422549+1 {
		t.Errorf("sda stat: %v %v", st, ok)
	}
	st, ok = ParseBlockStat(fixture(t, "block-stat-dm.txt"))
	if !ok || len(st) != 11 || st[statInFlight] != 0 || st[statIOTicks] != 796160 {
		t.Errorf("dm-0 stat: %v", st)
	}
	if _, ok := ParseBlockStat([]byte("1 2 3")); ok {
		t.Error("3 fields accepted")
	}
	in, ok := ParseInflight(fixture(t, "block-inflight-sdv.txt"))
	if !ok || in != [2]int64{0, 0} {
		t.Errorf("inflight: %v", in)
	}
	if in, ok := ParseInflight([]byte("       3        1\n")); !ok || in != [2]int64{3, 1} {
		t.Errorf("inflight: %v", in)
	}
	for _, bad := range []string{"", "1", "-1 0", "a b"} {
		if _, ok := ParseInflight([]byte(bad)); ok {
			t.Errorf("inflight %q accepted", bad)
		}
	}
	if d, ok := ParseDev([]byte("7:0\n")); !ok || d != "7:0" {
		t.Errorf("dev %q", d)
	}
	if _, ok := ParseDev([]byte("7:x")); ok {
		t.Error("bad dev accepted")
	}
}

func TestParseKeyValues(t *testing.T) {
	// rpc_xprt/<n>/info (net/sunrpc/debugfs.c) and ceph's status.
	got := ParseKeyValues([]byte("netid: tcp\naddr:  10.0.0.5\nport:  2049\nstate: 0x1b\n"))
	if got["addr"] != "10.0.0.5" || got["port"] != "2049" || got["netid"] != "tcp" {
		t.Errorf("xprt info: %v", got)
	}
	got = ParseKeyValues([]byte("instance: client.4161 (3)192.168.1.10:0/2873041234\nblocklisted: false\n"))
	if got["blocklisted"] != "false" || got["instance"] == "" {
		t.Errorf("status: %v", got)
	}
}
