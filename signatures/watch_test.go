package signatures

import (
	"reflect"
	"testing"
)

func TestMatchLine(t *testing.T) {
	for _, tc := range []struct {
		line string
		want []LineSignature
	}{
		{`nfs: server 10.0.0.7 not responding, still trying`, []LineSignature{{ID: "nfs-not-responding", Key: "10.0.0.7"}}},
		{`libceph: mon0 (1)10.0.0.1:6789 session lost, hunting for new mon`, []LineSignature{{ID: "libceph-session-lost", Key: "mon0 (1)10.0.0.1:6789"}}},
		{`INFO: task kworker/1:2:123 blocked for more than 120 seconds.`, []LineSignature{{ID: "kernel-hung-task", Key: "kworker/1:2:123"}}},
		{`E1121 operation_generator.go: UnmountVolume.TearDown failed for volume "v" (UniqueName: "kubernetes.io/csi/drv^vol-1") : unlinkat /var/lib/kubelet/pods/x: device or resource busy`,
			[]LineSignature{{ID: "teardown-busy", Key: "kubernetes.io/csi/drv^vol-1"}, {ID: "unlinkat-busy", Key: "/var/lib/kubelet/pods/x"}}},
		{`rpc error: code = Aborted desc = an operation with the given Volume ID vol-9 already exists`, []LineSignature{{ID: "csi-operation-exists", Key: "vol-9"}}},
		// The kubelet's first seconds: not a stuck PLEG.
		{`PLEG is not healthy: pleg has yet to be successful`, nil},
		{`an ordinary line`, nil},
		{``, nil},
	} {
		if got := MatchLine([]byte(tc.line)); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("MatchLine(%q) = %+v, want %+v", tc.line, got, tc.want)
		}
	}
}
