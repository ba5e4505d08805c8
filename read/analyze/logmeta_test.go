package analyze

import (
	"testing"
	"time"
)

func TestParseLogMeta(t *testing.T) {
	ref := time.Date(2026, 11, 23, 22, 30, 0, 0, time.UTC)
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	tests := []struct {
		name, line string
		want       logMeta
	}{
		{"journal short-iso-precise, kubelet", `2026-11-23T22:01:48.123456+00:00 vm kubelet[20997]: I1123 22:01:48.123400   20997 kubelet.go:2544] "Skipping pod synchronization" err="PLEG is not healthy: pleg has yet to be successful"`,
			logMeta{Time: at("2026-11-23T22:01:48.123456Z"), Zoned: true, Host: "vm", Ident: "kubelet", PID: 20997, KlogPID: 20997}},
		{"dmesg iso, comma", `2026-11-23T19:22:51,812730+00:00 loop1: detected capacity change from 0 to 32768`,
			logMeta{Time: at("2026-11-23T19:22:51.81273Z"), Zoned: true}},
		{"journal kernel", `2026-11-23T19:22:51.812730+01:00 node-a kernel: EXT4-fs (loop1): mounted filesystem`,
			logMeta{Time: at("2026-11-23T18:22:51.81273Z"), Zoned: true, Host: "node-a", Ident: "kernel"}},
		{"syslog, no year", `Nov 21 09:10:01 node1 kubelet[812]: I1121 09:10:01.000100     812 kubelet.go:2355] "SyncLoop ADD"`,
			logMeta{Time: at("2026-11-21T09:10:01Z"), Host: "node1", Ident: "kubelet", PID: 812, KlogPID: 812}},
		{"syslog from last December", `Dec 31 23:59:59 n kernel: x`, logMeta{Time: at("2025-12-31T23:59:59Z"), Host: "n", Ident: "kernel"}},
		{"klog only (a kubelet.log file)", `E1123 21:00:00.500000    4321 nestedpendingoperations.go:348] Operation for "{volumeName:x podName:y nodeName:}" failed`,
			logMeta{Time: at("2026-11-23T21:00:00.5Z"), KlogPID: 4321}},
		{"CRI container log", `2026-11-23T22:00:00.000000001Z stderr F I1123 22:00:00.000000       1 nodeserver.go:200] NodeUnpublishVolume NodeId: node-b`,
			logMeta{Time: at("2026-11-23T22:00:00.000000001Z"), Zoned: true, KlogPID: 1, Node: "node-b"}},
		{"names a node", `... UnmountDevice failed for volume \"pvc-1\" (UniqueName: \"x\") on node \"10.125.54.133\" : rbd: failed`,
			logMeta{Node: "10.125.54.133"}},
		{"node= key", `I1123 22:00:00.000000 1 a.go:1] "Attach" node="worker-7"`, logMeta{Time: at("2026-11-23T22:00:00Z"), KlogPID: 1, Node: "worker-7"}},
		{"nothing", `hello world`, logMeta{}},
		{"bad stamp", `2026-13-45T99:99:99.0+00:00 h x[1]: y`, logMeta{Host: "h", Ident: "x", PID: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := parseLogMeta([]byte(tt.line), ref)
			if !got.Time.Equal(tt.want.Time) {
				t.Errorf("time %v, want %v", got.Time, tt.want.Time)
			}
			got.Time, tt.want.Time = time.Time{}, time.Time{}
			if got != tt.want {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func FuzzParseLogMeta(f *testing.F) {
	for _, s := range []string{
		`2026-11-23T22:01:48.123456+00:00 vm kubelet[20997]: I1123 22:01:48.123400   20997 kubelet.go:2544] x`,
		`Nov 21 09:10:01 node1 kubelet[812]: y`, `2026-11-23T19:22:51,812730+00:00 loop1: z`, `E1123 21:00:00.5 1 a.go:1] node="n"`,
	} {
		f.Add([]byte(s))
	}
	ref := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, b []byte) {
		m := parseLogMeta(b, ref)
		if m.PID < 0 || m.KlogPID < 0 {
			t.Fatalf("negative pid from %q: %+v", b, m)
		}
	})
}

func TestSameNodeAndVersion(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{{"ip-10-0-0-1", "ip-10-0-0-1.ec2.internal", true}, {"Node-A", "node-a", true}, {"node-a.x", "node-a.y", false}, {"node-a", "node-b", false}} {
		if got := sameNode(c.a, c.b); got != c.want {
			t.Errorf("sameNode(%q, %q) = %v", c.a, c.b, got)
		}
	}
	for _, c := range []struct {
		v    string
		want int
		ok   bool
	}{{"v1.34.4", 34, true}, {"1.25.0-eks-1", 25, true}, {"v2.0.0", 0, false}, {"", 0, false}, {"v1.x", 0, false}} {
		if got, ok := minorVersion(c.v); got != c.want || ok != c.ok {
			t.Errorf("minorVersion(%q) = %d %v", c.v, got, ok)
		}
	}
	for _, c := range []struct{ cmd, want string }{
		{"/usr/bin/kubelet --hostname-override=node-1 --v=2", "node-1"}, {"kubelet --hostname-override node-2", "node-2"}, {"kubelet", ""},
	} {
		if got := flagValue(c.cmd, "--hostname-override"); got != c.want {
			t.Errorf("flagValue(%q) = %q", c.cmd, got)
		}
	}
}
