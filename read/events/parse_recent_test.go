package events

import (
	"strings"
	"testing"
	"time"
)

// A driver's failed call that names no object takes it from the request
// logged just before it, whatever the volume is called: a persistent
// volume named pvc-<uuid>, a static one named by its owner, or an inline
// (ephemeral) one known only by its pod volume path and a CSI handle.
func TestFailureTakesObjectOfRequestBefore(t *testing.T) {
	ref := time.Date(2026, 12, 8, 0, 0, 0, 0, time.UTC)
	const failed = `E1214 04:19:41.296439   19551 utils.go:80] GRPC error: rpc error: code = Internal desc = Mount failed with error: context deadline exceeded, output:`
	cases := []struct {
		name    string
		request string
		// want is the object the failure must name; "" when it must
		// name none.
		want string
	}{
		{"inline volume by its pod volume path",
			`I1214 04:19:31.312118   19551 utils.go:76] GRPC request: {"target_path":"/var/lib/kubelet/pods/6fb4dd4f-d690-4c5f-be94-acdb8f9a2839/volumes/kubernetes.io~csi/azure-blob/mount","volume_id":"csi-6ae62a3559b95c6717388811f7fada0822aff219c03944ad18b3d681714d21aa"}`,
			"azure-blob"},
		{"static volume by its staging path",
			`I1214 04:19:31.312118   19551 utils.go:76] GRPC request: {"staging_target_path":"/var/lib/kubelet/plugins/kubernetes.io/csi/pv/my-share/globalmount","volume_id":"rg#acct#share"}`,
			"my-share"},
		{"a request naming no volume lends none",
			`I1214 04:19:31.312118   19551 utils.go:76] GRPC request: {}`,
			""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := NewParser(ref)
			p.Parse([]byte(`I1214 04:19:31.312092   19551 utils.go:75] GRPC call: /csi.v1.Node/NodePublishVolume`))
			p.Parse([]byte(c.request))
			ev, ok := p.Parse([]byte(failed))
			if ev.Outcome != OutcomeFailed {
				t.Fatalf("outcome %v, want failed (%+v)", ev.Outcome, ev)
			}
			_, obj := ev.Keys.Object()
			if c.want == "" {
				if ok || obj != "" {
					t.Errorf("named %q (ok=%v), want nothing", obj, ok)
				}
				return
			}
			all := ev.Keys.All()
			found := false
			for _, k := range all {
				if k == c.want || strings.Contains(k, "/"+c.want+"/") {
					found = true
				}
			}
			if !ok || !found {
				t.Errorf("ok=%v keys %v, want one naming %q", ok, all, c.want)
			}
		})
	}
}
