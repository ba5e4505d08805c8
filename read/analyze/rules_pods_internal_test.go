package analyze

import (
	"strings"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/bundle/layout"
)

func TestTrouble(t *testing.T) {
	now := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { x := now.Add(-d); return &x }
	grace := int64(30)
	waiting := func(reason string) layout.KubeContainerStatus {
		var cs layout.KubeContainerStatus
		cs.Name = "c"
		cs.State.Waiting = &struct {
			Reason  string `json:"reason,omitempty"`
			Message string `json:"message,omitempty"`
		}{Reason: reason}
		return cs
	}
	tests := []struct {
		name      string
		pod       layout.KubePod
		kind, sym string
	}{
		{"running", layout.KubePod{Status: layout.KubePodStatus{Phase: "Running"}}, "", ""},
		{"deleting within grace", layout.KubePod{Metadata: layout.KubeMeta{DeletionTimestamp: at(-10 * time.Second)}}, "", ""},
		{"terminating 2h", layout.KubePod{Metadata: layout.KubeMeta{DeletionTimestamp: at(2 * time.Hour), DeletionGracePeriodSeconds: &grace}},
			troubleTerminating, "stuck Terminating for 2h00m past its 30s grace period"},
		{"pending young", layout.KubePod{Metadata: layout.KubeMeta{CreationTimestamp: at(time.Minute)}, Status: layout.KubePodStatus{Phase: "Pending"}}, "", ""},
		{"pending never synced", layout.KubePod{Metadata: layout.KubeMeta{CreationTimestamp: at(40 * time.Minute)}, Status: layout.KubePodStatus{Phase: "Pending"}},
			troublePending, "Pending for 40m on this node"},
		{"container creating", layout.KubePod{Metadata: layout.KubeMeta{CreationTimestamp: at(3 * time.Hour)},
			Status: layout.KubePodStatus{Phase: "Pending", ContainerStatuses: []layout.KubeContainerStatus{waiting("ContainerCreating")}}},
			troubleCreating, "ContainerCreating for 3h00m"},
		{"image pull", layout.KubePod{Metadata: layout.KubeMeta{CreationTimestamp: at(10 * time.Minute)},
			Status: layout.KubePodStatus{Phase: "Pending", ContainerStatuses: []layout.KubeContainerStatus{waiting("ImagePullBackOff")}}},
			troubleWaiting, "Pending for 10m: container c waiting (ImagePullBackOff)"},
		{"scheduled later than created", layout.KubePod{Metadata: layout.KubeMeta{CreationTimestamp: at(time.Hour)},
			Status: layout.KubePodStatus{Phase: "Pending", Conditions: []layout.KubeCondition{{Type: "PodScheduled", Status: "True", LastTransitionTime: at(time.Minute)}}}}, "", ""},
	}
	for _, tt := range tests {
		sym, kind, _ := trouble(&tt.pod, now)
		if kind != tt.kind || !strings.HasPrefix(sym, tt.sym) || (tt.sym == "" && sym != "") {
			t.Errorf("%s: trouble = %q, %q; want %q, %q…", tt.name, kind, sym, tt.kind, tt.sym)
		}
	}
}
