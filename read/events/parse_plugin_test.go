package events

import (
	"testing"
)

// Node plugins' headers and keys the general readers left out: each
// case is a plugin's record shape (a header, a key's name and shape), not
// one plugin's wording; the negative cases are what must not be read so.
func TestPluginHeadersAndKeys(t *testing.T) {
	type step struct {
		line string
		want want
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"stamp, process number and bracketed level with a colon", []step{
			{`2026-11-21 09:10:01.000001 4242 [ERROR]: [requestID:77] Run task of taskflow StageVolume error: check device: dm-7 is a partition device failed`,
				want{ok: true, level: LevelError, op: OpStage, outcome: OutcomeFailed, keys: Keys{Device: "/dev/dm-7"}}},
		}},
		{"a device's bare name only under a device key", []step{
			{`2026-11-21 09:10:01.000001 4242 [ERROR]: [requestID:78] Stage volume vol-0a1b2c3d4e5f60718 error: sdb is busy`,
				want{ok: true, level: LevelError, outcome: OutcomeFailed, keys: Keys{Handle: "vol-0a1b2c3d4e5f60718"}}},
		}},
		{"a bracketed ISO stamp is the writer's, not the kernel's ring", []step{
			{`[2026-11-21 09:10:01,517] ERROR [nodeserver - 88:NodeStageVolume] - mount failed: exit status 32    volume=share-a`,
				want{ok: true, level: LevelError, op: OpStage, outcome: OutcomeFailed, exit: 32, method: "NodeStageVolume", keys: Keys{Handle: "share-a"}}},
		}},
		{"Python gRPC server's handler failure is the announced call's", []step{
			{`[2026-11-21 09:10:01,517] DEBUG [nodeserver - 141:NodeUnstageVolume] - Received the unmount request    volume=data-7`,
				want{level: LevelDebug, method: "NodeUnstageVolume"}},
			{`[2026-11-21 09:10:01,518] ERROR [_server - 454:_call_behavior] - Exception calling application: [1]`,
				want{ok: true, level: LevelError, op: OpUnstage, outcome: OutcomeFailed, keys: Keys{Handle: "data-7"}}},
		}},
		{"another module's error takes no call", []step{
			{`[2026-11-21 09:10:01,517] DEBUG [nodeserver - 141:NodeUnstageVolume] - Received the unmount request    volume=data-7`, want{}},
			{`[2026-11-21 09:10:01,518] ERROR [metrics - 12:export] - Exception exporting: [1]`, want{}},
		}},
		{"several JSON records on one line, the failure with an NVMe-oF target", []step{
			{`{"level":"debug","msg":"connect output: already connected","time":"2026-11-21T09:10:01Z"} {"level":"error","msg":"Error during nvme connect nqn.2020-05.com.example:array:00:7f3e at 10.0.0.7: exit status 1","time":"2026-11-21T09:10:01Z"}`,
				want{ok: true, level: LevelError, op: OpAttach, outcome: OutcomeFailed, exit: 1, keys: Keys{IQN: "nqn.2020-05.com.example:array:00:7f3e"}}},
		}},
		{"a malformed JSON line is one record", []step{
			{`{"level":"info","msg":"Logging to target \{10.0.0.7 x} {"level":"error"`, want{}},
		}},
		{"a pod under a pod key of the driver's text", []step{
			{`E1121 09:10:01.000000       7 reconciler.go:156] "Driver check pod error, will retry" err="mount point is not ready eventually, mountpod: fuse-node-a-pv-x7k2p"`,
				want{ok: true, level: LevelError, op: OpMount, outcome: OutcomeFailed, keys: Keys{Pod: "fuse-node-a-pv-x7k2p"}}},
		}},
		{"a volume's UUID under a volume key", []step{
			{`{"level":"error","ts":"2026-11-21T09:10:11Z","logger":"driver.node","msg":"GRPC error","error":"rpc error: code = Internal desc = mount failed: volume=5b6c7d8e-9f0a-4b1c-8d2e-3f4a5b6c7d8e, error=exit status 32"}`,
				want{ok: true, level: LevelError, op: OpMount, outcome: OutcomeFailed, keys: Keys{Handle: "5b6c7d8e-9f0a-4b1c-8d2e-3f4a5b6c7d8e"}}},
		}},
		{"a volume key's prose value is not its ID", []step{
			{`E1121 09:10:01.000000       1 node.go:9] failed to stage volume: exit status 1`,
				want{level: LevelError, op: OpStage, outcome: OutcomeFailed}},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := NewParser(ref)
			for i, s := range c.steps {
				ev, ok := p.Parse([]byte(s.line))
				w := s.want
				if ok != w.ok {
					t.Errorf("step %d: ok=%v, want %v (%+v)", i, ok, w.ok, ev)
				}
				if w.level != LevelUnknown && ev.Level != w.level {
					t.Errorf("step %d: level %v, want %v", i, ev.Level, w.level)
				}
				if ev.Source == "kernel" {
					t.Errorf("step %d: read as the kernel's", i)
				}
				if w.op != OpNone && ev.Op != w.op {
					t.Errorf("step %d: op %q, want %q", i, ev.Op, w.op)
				}
				if ev.Outcome != w.outcome {
					t.Errorf("step %d: outcome %v, want %v", i, ev.Outcome, w.outcome)
				}
				if w.method != "" && ev.Method != w.method {
					t.Errorf("step %d: method %q, want %q", i, ev.Method, w.method)
				}
				if w.exit != 0 && ev.Err.Exit != w.exit {
					t.Errorf("step %d: exit %d, want %d", i, ev.Err.Exit, w.exit)
				}
				for _, k := range []struct{ name, got, want string }{
					{"handle", ev.Keys.Handle, w.keys.Handle}, {"device", ev.Keys.Device, w.keys.Device},
					{"pod", ev.Keys.Pod, w.keys.Pod}, {"target", ev.Keys.IQN, w.keys.IQN},
				} {
					if k.got != k.want {
						t.Errorf("step %d: %s %q, want %q", i, k.name, k.got, k.want)
					}
				}
			}
		})
	}
}

// An NVMe-oF subsystem's name is a target of its own kind, not iSCSI's.
func TestNVMeTargetKind(t *testing.T) {
	if kind, v := (Keys{IQN: "nqn.2020-05.com.example:a"}).Object(); kind != "NVMe-oF target" || v != "nqn.2020-05.com.example:a" {
		t.Errorf("NQN: %q %q", kind, v)
	}
	if kind, _ := (Keys{IQN: "iqn.2005-10.org.freenas.ctl:a"}).Object(); kind != "iSCSI target" {
		t.Errorf("IQN: %q", kind)
	}
}

// A klog record of level F (fatal) is read like one of E or W.
func TestKlogFatalMayMatter(t *testing.T) {
	if !klogWarnOrError([]byte(`F0129 15:23:21.872324       1 containerd.go:75] unable to retrieve local image "x"`)) {
		t.Error("fatal record passed over")
	}
	if klogWarnOrError([]byte(`I0129 15:23:21.872324       1 containerd.go:75] Fine`)) {
		t.Error("info record taken")
	}
}
