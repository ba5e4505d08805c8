package watch

import (
	"reflect"
	"testing"
)

func TestParseTaskStat(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want TaskStat
		ok   bool
	}{
		{"4242 (kubelet) D 1 4242 4242 0 -1", TaskStat{Comm: "kubelet", State: 'D', PPID: 1}, true},
		{"17 (a) b) (c) S 3 17", TaskStat{Comm: "a) b) (c", State: 'S', PPID: 3}, true},
		{"9 (with space) R 0", TaskStat{Comm: "with space", State: 'R', PPID: 0}, true},
		{"9 (x)", TaskStat{}, false},
		{"9 (x) DD 1", TaskStat{}, false},
		{"9 (x) D one", TaskStat{}, false},
		{"no parens D 1", TaskStat{}, false},
		{"", TaskStat{}, false},
	} {
		got, err := ParseTaskStat([]byte(tc.in))
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseTaskStat(%q) = %+v, %v; want %+v, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestParseKmsgRecord(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want KmsgRecord
		ok   bool
	}{
		{"3,1021,123456,-;nfs: server 10.0.0.7 not responding, still trying\n", KmsgRecord{Seq: 1021, Message: "nfs: server 10.0.0.7 not responding, still trying"}, true},
		{"6,7,8,-,caller=T1;INFO: task ls:99 blocked for more than 120 seconds.\n SUBSYSTEM=x\n DEVICE=y\n", KmsgRecord{Seq: 7, Message: "INFO: task ls:99 blocked for more than 120 seconds."}, true},
		{"6,8,9,c;a;b", KmsgRecord{Seq: 8, Message: "a;b"}, true},
		{"6,x,9,-;m", KmsgRecord{}, false},
		{"6;m", KmsgRecord{}, false},
		{"no semicolon", KmsgRecord{}, false},
	} {
		got, err := ParseKmsgRecord([]byte(tc.in))
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseKmsgRecord(%q) = %+v, %v; want %+v, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestParseMountinfo(t *testing.T) {
	in := "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n" +
		"30 22 0:50 / /mnt/with\\040space rw - fuse.sshfs host:/x rw\n" +
		"31 22 0:51 / /var/lib/kubelet/pods/u/volumes/kubernetes.io~csi/pv/mount rw shared:9 master:2 - ceph 10.0.0.1:6789:/ rw\n" +
		"garbage\n" +
		"32 22 0:52 / /no/separator rw\n" +
		"33 22 0:53 / /bad\\9 rw - nfs4 s:/e rw"
	want := []Mount{
		{Point: "/", FSType: "ext4", Source: "/dev/sda1"},
		{Point: "/mnt/with space", FSType: "fuse.sshfs", Source: "host:/x"},
		{Point: "/var/lib/kubelet/pods/u/volumes/kubernetes.io~csi/pv/mount", FSType: "ceph", Source: "10.0.0.1:6789:/"},
		{Point: `/bad\9`, FSType: "nfs4", Source: "s:/e"},
	}
	if got := ParseMountinfo([]byte(in)); !reflect.DeepEqual(got, want) {
		t.Errorf("ParseMountinfo = %+v\nwant %+v", got, want)
	}
}

func TestFailedChecks(t *testing.T) {
	body := "[+]ping ok\n[+]log ok\n[-]syncloop failed: reason withheld\n[-]pleg failed: reason withheld\nhealthz check failed\n"
	if got, want := FailedChecks([]byte(body), 10), []string{"[-]syncloop failed: reason withheld", "[-]pleg failed: reason withheld"}; !reflect.DeepEqual(got, want) {
		t.Errorf("FailedChecks = %q, want %q", got, want)
	}
	if got := FailedChecks([]byte(body), 1); len(got) != 1 {
		t.Errorf("FailedChecks(max 1) = %q", got)
	}
}

func TestParseJournalJSON(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want JournalEntry
		ok   bool
	}{
		{`{"__CURSOR":"s=1","SYSLOG_IDENTIFIER":"kubelet","MESSAGE":"E1121 TearDown failed"}`, JournalEntry{Cursor: "s=1", Identifier: "kubelet", Message: "E1121 TearDown failed"}, true},
		{`{"__CURSOR":"s=2","_SYSTEMD_UNIT":"containerd.service","MESSAGE":[104,105,255]}`, JournalEntry{Cursor: "s=2", Identifier: "containerd", Message: "hi\xff"}, true},
		{`{"__CURSOR":"s=3","SYSLOG_IDENTIFIER":["kubelet","k"],"MESSAGE":null}`, JournalEntry{Cursor: "s=3", Identifier: "kubelet"}, true},
		{`{"MESSAGE":"no cursor"}`, JournalEntry{}, false},
		{`not json`, JournalEntry{}, false},
	} {
		got, err := ParseJournalJSON([]byte(tc.in))
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseJournalJSON(%s) = %+v, %v; want %+v, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}
