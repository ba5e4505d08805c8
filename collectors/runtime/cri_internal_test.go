package runtime

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	criapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodesnap/nodesnap/bundle/layout"
)

func TestCRIDescribeError(t *testing.T) {
	for _, tc := range []struct {
		name, method    string
		err             error
		skipped, failed string
		timedOut        bool
	}{
		{"no CRI plugin", criapi.RuntimeService_Version_FullMethodName, status.Error(codes.Unimplemented, "unknown service runtime.v1.RuntimeService"),
			"does not serve CRI v1 on this socket", "", false},
		{"method not implemented", criapi.RuntimeService_ListContainerStats_FullMethodName, status.Error(codes.Unimplemented, "not implemented"),
			"does not implement /runtime.v1.RuntimeService/ListContainerStats", "", false},
		{"deadline", criapi.RuntimeService_Version_FullMethodName, status.Error(codes.DeadlineExceeded, "context deadline exceeded"),
			"", "no answer within 3s", true},
		{"refused", criapi.RuntimeService_Version_FullMethodName, status.Error(codes.Unavailable, `connection error: desc = "transport: Error while dialing: dial unix /run/x.sock: connect: connection refused"`),
			"", "connection refused: the socket exists but nothing accepts on it", false},
		{"other unavailable", criapi.RuntimeService_Version_FullMethodName, status.Error(codes.Unavailable, "connection closed before server preface received"),
			"", "unavailable: connection closed before server preface received", false},
		{"collector stopped", criapi.ImageService_ListImages_FullMethodName, status.Error(codes.Canceled, "context canceled"),
			"", "collector's deadline", true},
		{"runtime error", criapi.RuntimeService_ListContainers_FullMethodName, status.Error(codes.Internal, "boltdb: bucket not found"),
			"", "/runtime.v1.RuntimeService/ListContainers failed: Internal: boltdb: bucket not found", false},
		{"not a status", criapi.RuntimeService_Status_FullMethodName, fmt.Errorf("wrapped: %w", errors.New("odd")),
			"", "failed: Unknown: wrapped: odd", false},
	} {
		skipped, failed, to := criDescribeError(tc.err, tc.method, 3*time.Second)
		if (tc.skipped == "") != (skipped == "") || !strings.Contains(skipped, tc.skipped) ||
			(tc.failed == "") != (failed == "") || !strings.Contains(failed, tc.failed) || to != tc.timedOut {
			t.Errorf("%s: skipped %q, failed %q, timed out %v; want %q, %q, %v", tc.name, skipped, failed, to, tc.skipped, tc.failed, tc.timedOut)
		}
	}
}

// The verbose status's info map holds the runtime's configuration as a
// JSON string: it comes out as an object, credentials gone; the answer's
// own fields are in the CRI JSON mapping (crictl's names).
func TestCRIJSONStatus(t *testing.T) {
	resp := &criapi.StatusResponse{
		Status: &criapi.RuntimeStatus{Conditions: []*criapi.RuntimeCondition{
			{Type: "RuntimeReady", Status: true},
			{Type: "NetworkReady", Status: false, Reason: "NetworkPluginNotReady", Message: "cni config uninitialized"},
		}},
		Info: map[string]string{
			"config":            `{"registry":{"configs":{"r.example":{"auth":{"username":"robot","password":"s3cret-pw","auth":"cm9ib3Q6czNjcmV0","identitytoken":""}}}},"sandboxImage":"pause:3.9"}`,
			"golang":            `"go1.20.1"`,
			"lastCNILoadStatus": "cni config load failed: no network config found in /etc/cni/net.d",
		},
	}
	out, err := criJSON(resp)
	if err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{"s3cret-pw", "cm9ib3Q6czNjcmV0"} {
		if strings.Contains(string(out), gone) {
			t.Errorf("%s kept:\n%s", gone, out)
		}
	}
	var got struct {
		Status struct {
			Conditions []struct {
				Type, Reason string
				Status       bool
			}
		}
		Info struct {
			Config struct {
				Registry struct {
					Configs map[string]struct{ Auth map[string]string }
				}
				SandboxImage string
			}
			Golang            string
			LastCNILoadStatus string
		}
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if c := got.Status.Conditions; len(c) != 2 || !c[0].Status || c[1].Reason != "NetworkPluginNotReady" {
		t.Errorf("conditions %+v", c)
	}
	if a := got.Info.Config.Registry.Configs["r.example"].Auth; a["username"] != "robot" || a["password"] != "[REDACTED]" || a["identitytoken"] != "" {
		t.Errorf("auth %v", a)
	}
	if got.Info.Config.SandboxImage != "pause:3.9" || got.Info.Golang != "go1.20.1" || !strings.HasPrefix(got.Info.LastCNILoadStatus, "cni config load failed") {
		t.Errorf("info %+v", got.Info)
	}
	// One value per line, for the line redactor.
	if strings.Count(string(out), "\n") < 10 {
		t.Errorf("not indented:\n%s", out)
	}
	if resp.Info == nil {
		t.Errorf("criJSON changed the answer it was given")
	}
}

// Listings keep crictl's field names, so pod UIDs and sandbox ids are where
// a reader of `crictl ... -o json` looks for them.
func TestCRIJSONListings(t *testing.T) {
	out, err := criJSON(&criapi.ListContainersResponse{Containers: []*criapi.Container{{
		Id: "c1", PodSandboxId: "p1", State: criapi.ContainerState_CONTAINER_EXITED,
		Metadata:    &criapi.ContainerMetadata{Name: "writer", Attempt: 2},
		Annotations: map[string]string{"io.kubernetes.pod.uid": "0b7c-uid", "password": "annot-pw"},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Containers []struct {
			Id, PodSandboxId, State string
			Metadata                struct {
				Name    string
				Attempt int
			}
			Annotations map[string]string
		}
	}
	if err := json.Unmarshal(out, &got); err != nil || len(got.Containers) != 1 {
		t.Fatalf("%v:\n%s", err, out)
	}
	c := got.Containers[0]
	if c.PodSandboxId != "p1" || c.State != "CONTAINER_EXITED" || c.Metadata.Name != "writer" || c.Metadata.Attempt != 2 ||
		c.Annotations["io.kubernetes.pod.uid"] != "0b7c-uid" || c.Annotations["password"] != "[REDACTED]" {
		t.Errorf("%+v from:\n%s", c, out)
	}
	if !strings.Contains(string(out), `"podSandboxId"`) {
		t.Errorf("not crictl's field names:\n%s", out)
	}
}

func TestCRIStatusInfo(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   map[string]string
		want map[string]string
	}{
		{"empty", map[string]string{}, map[string]string{}},
		{"object", map[string]string{"config": `{"a":1,"token":"t0k"}`}, map[string]string{"config": "{\n  \"a\": 1,\n  \"token\": \"[REDACTED]\"\n}"}},
		{"plain text", map[string]string{"x": "not json {"}, map[string]string{"x": `"not json {"`}},
		{"json string", map[string]string{"v": `"1.7.0"`}, map[string]string{"v": `"1.7.0"`}},
		{"text holding a credential", map[string]string{"x": `password = "pw"`}, map[string]string{"x": `"password = \"[REDACTED]\""`}},
		{"invalid utf-8", map[string]string{"x": "\xff"}, map[string]string{"x": `"\ufffd"`}},
	} {
		got := CRIStatusInfo(tc.in)
		if len(got) != len(tc.want) {
			t.Errorf("%s: %d keys, want %d", tc.name, len(got), len(tc.want))
		}
		for k, w := range tc.want {
			if string(got[k]) != w {
				t.Errorf("%s: %s = %s, want %s", tc.name, k, got[k], w)
			}
			if !json.Valid(got[k]) {
				t.Errorf("%s: %s is not JSON: %s", tc.name, k, got[k])
			}
		}
	}
}

func TestRuntimeJSON(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
		err            bool
	}{
		{"docker ps", `[{"Id":"4f1d","Names":["/w"],"Labels":{"password":"lbl-pw"}}]`,
			"[\n  {\n    \"Id\": \"4f1d\",\n    \"Names\": [\n      \"/w\"\n    ],\n    \"Labels\": {\n      \"password\": \"[REDACTED]\"\n    }\n  }\n]\n", false},
		{"trailing newline", "{}\n", "{}\n", false},
		{"html error page", "<html>502</html>", "", true},
		{"truncated", `{"Id":`, "", true},
		{"empty", "", "", true},
	} {
		got, err := RuntimeJSON([]byte(tc.in))
		if (err != nil) != tc.err || string(got) != tc.want {
			t.Errorf("%s: %q, %v; want %q (error %v)", tc.name, got, err, tc.want, tc.err)
		}
	}
}

func TestRtUnlistedReason(t *testing.T) {
	rt := &layout.RuntimeStatus{Name: "cri-o", Socket: "/run/crio/crio.sock", Items: []layout.RuntimeItem{
		{What: "CRI version", Method: criapi.RuntimeService_Version_FullMethodName, Error: "no answer within 10s: the runtime accepted the connection but did not respond"},
		{What: "CRI containers", Method: criapi.RuntimeService_ListContainers_FullMethodName, Skipped: "not attempted: the CRI socket did not answer Version"},
		{What: "crictl ps -a", Command: []string{"crictl", "ps", "-a"}, Error: "crictl exited with status 1: context deadline exceeded"},
	}}
	got := unlistedReason(rt, map[string]bool{"ctr": true})
	want := "cri-o's socket /run/crio/crio.sock exists but its containers could not be listed: " +
		"the CRI API: no answer within 10s: the runtime accepted the connection but did not respond; " +
		"crictl ps -a: crictl exited with status 1: context deadline exceeded; no client program to ask instead (ctr not installed)"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func FuzzCRIStatusInfo(f *testing.F) {
	f.Add("config", `{"registry":{"auths":{"r":{"auth":"eA=="}}}}`, "x", "plain")
	f.Add("a", `"s"`, "b", `password = "p"`)
	f.Add("a", "\xff{", "b", `{"token":"\"}`)
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		out := CRIStatusInfo(map[string]string{k1: v1, k2: v2})
		if _, err := json.Marshal(out); err != nil {
			t.Fatalf("not JSON: %v", err)
		}
		for k, v := range out {
			if !json.Valid(v) {
				t.Fatalf("%q: %q is not JSON", k, v)
			}
		}
	})
}

func FuzzRuntimeJSON(f *testing.F) {
	f.Add([]byte(`[{"Id":"x","Labels":{"secret":"s"}}]`))
	f.Add([]byte(`{"auth":"eA==","x":[1,2,{"password":""}]}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := RuntimeJSON(data)
		if err != nil {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("output is not JSON:\n%s", out)
		}
		again, err := RuntimeJSON(out)
		if err != nil || string(again) != string(out) {
			t.Fatalf("not stable: %v\n%s\n%s", err, out, again)
		}
	})
}
