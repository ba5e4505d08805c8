package events

import (
	"testing"
	"time"
	"unicode/utf8"
)

// Records whose writer opens them with Go's log stamp, a device a record
// quotes after the word "device", and a pod named namespace/name after the
// word "pod": each case is a shape (a header, a key's form), the negative
// cases what must not be read so.
func TestGoStampDeviceWordAndNamespacedPod(t *testing.T) {
	cases := []struct {
		name string
		line string
		want want
		// at is the record's time, when it must be read.
		at time.Time
	}{
		{"Go log stamp, process tag and a level in angle brackets (a PV directory's mkdir)", `2026/11/21 09:10:01.000001 fusefs[7] <FATAL>: create /mnt/pvc-5d1e2f3a-1b2c-4d5e-8f90-0a1b2c3d4e5f: mkdir /mnt/pvc-5d1e2f3a-1b2c-4d5e-8f90-0a1b2c3d4e5f: file exists`,
			want{ok: true, level: LevelFatal, op: OpMkdir, outcome: OutcomeFailed, errno: "EEXIST", keys: Keys{PV: "pvc-5d1e2f3a-1b2c-4d5e-8f90-0a1b2c3d4e5f"}},
			time.Date(2026, 11, 21, 9, 10, 1, 1000, time.UTC)},
		{"Go log stamp and a logger's level suffix", `2026/11/21 09:10:01.000002 fuse.ERROR mount /var/lib/kubelet/pods/0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d/volumes/kubernetes.io~csi/pvc-5d1e2f3a-1b2c-4d5e-8f90-0a1b2c3d4e5f/mount: transport endpoint is not connected`,
			want{ok: true, level: LevelError, op: OpMount, outcome: OutcomeFailed, errno: "ENOTCONN", keys: Keys{PV: "pvc-5d1e2f3a-1b2c-4d5e-8f90-0a1b2c3d4e5f"}}, time.Time{}},
		{"Go log stamp and a bare level word", `2026/11/21 09:10:01 ERROR mount of pvc-5d1e2f3a-1b2c-4d5e-8f90-0a1b2c3d4e5f failed`,
			want{ok: true, level: LevelError, op: OpMount, outcome: OutcomeFailed, keys: Keys{PV: "pvc-5d1e2f3a-1b2c-4d5e-8f90-0a1b2c3d4e5f"}}, time.Time{}},
		{"Go log stamp without a level: a success, naming no object", `2026/11/21 09:10:01.000003 File system has been successfully mounted.`,
			want{op: OpMount, outcome: OutcomeSucceeded}, time.Date(2026, 11, 21, 9, 10, 1, 3000, time.UTC)},
		{"a stamp with dashes is not Go's", `2026-11-21 09:10:01 fusefs[7] <FATAL>: create /mnt/x: file exists`,
			want{}, time.Time{}},
		{"a bare device name quoted after the word device", `time="2026-11-21T09:10:01Z" level=error msg="GRPC error: rpc error: code = Internal desc = failed to stage volume: multipath device 'dm-12' serial check failed" requestSource=CSI`,
			want{ok: true, level: LevelError, op: OpStage, outcome: OutcomeFailed, code: "Internal", keys: Keys{Device: "/dev/dm-12"}}, time.Time{}},
		{"a device word quoting something that is no device", `time="2026-11-21T09:10:01Z" level=error msg="failed to stage volume: device 'primary' not ready"`,
			want{level: LevelError, op: OpStage, outcome: OutcomeFailed}, time.Time{}},
		{"a pod named namespace/name after the word pod", `E1121 09:10:01.000000       1 server.go:145] GRPC error: failed to mount secrets store objects for pod team-a/api-7d9f8b-x2k4q, err: rpc error: code = Unknown desc = failed to mount objects`,
			want{ok: true, level: LevelError, op: OpMount, outcome: OutcomeFailed, code: "Unknown", keys: Keys{Pod: "team-a/api-7d9f8b-x2k4q"}}, time.Time{}},
		{"a path after the word pod is no pod (the path is the object)", `E1121 09:10:01.000000       1 server.go:145] failed to mount for pod /var/lib/kubelet/x`,
			want{ok: true, level: LevelError, op: OpMount, outcome: OutcomeFailed}, time.Time{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := NewParser(ref)
			ev, ok := p.Parse([]byte(c.line))
			w := c.want
			if ok != w.ok {
				t.Errorf("ok=%v, want %v (%+v)", ok, w.ok, ev)
			}
			if w.level != LevelUnknown && ev.Level != w.level {
				t.Errorf("level %v, want %v", ev.Level, w.level)
			}
			if w.op != OpNone && ev.Op != w.op {
				t.Errorf("op %q, want %q", ev.Op, w.op)
			}
			if ev.Outcome != w.outcome {
				t.Errorf("outcome %v, want %v", ev.Outcome, w.outcome)
			}
			if w.code != "" && ev.Err.Code != w.code {
				t.Errorf("code %q, want %q", ev.Err.Code, w.code)
			}
			if w.errno != "" && ev.Err.Errno != w.errno {
				t.Errorf("errno %q, want %q", ev.Err.Errno, w.errno)
			}
			if !c.at.IsZero() && !ev.Time.Equal(c.at) {
				t.Errorf("time %v, want %v", ev.Time, c.at)
			}
			for _, k := range []struct{ name, got, want string }{
				{"pv", ev.Keys.PV, w.keys.PV}, {"device", ev.Keys.Device, w.keys.Device}, {"pod", ev.Keys.Pod, w.keys.Pod},
			} {
				if k.got != k.want {
					t.Errorf("%s %q, want %q", k.name, k.got, k.want)
				}
			}
		})
	}
}

// The readers' own edges: a device word at the end of the text, a quote
// left open, an escaped quote, a pod word with nothing after it.
func TestQuotedDeviceAndPodEdges(t *testing.T) {
	for in, want := range map[string]string{
		`device`: "", `device '`: "", `device 'sdb`: "", `device \"sdb\" busy`: "sdb", `mydevice 'sdb'`: "",
		`device 'nvme0n1p2' gone`: "nvme0n1p2", `device "" x`: "", `device 'sdb' and device 'dm-3'`: "sdb",
	} {
		if got := quotedDeviceName(in); got != want {
			t.Errorf("quotedDeviceName(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{
		`pod `: "", `pod a/b`: "a/b", `pod A/b`: "", `apod a/b`: "", `pod a/b/c`: "a/b", `pod -a/b`: "",
	} {
		if got := namespacedPod(in); got != want {
			t.Errorf("namespacedPod(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzGoStamp: a record opening with Go's log stamp, however malformed,
// is read without a panic and keeps its message valid text.
func FuzzGoStamp(f *testing.F) {
	for _, s := range []string{
		`2026/11/21 09:10:01.000001 fusefs[7] <FATAL>: create /mnt/x: file exists`,
		`2026/11/21 09:10:01.000002 fuse.ERROR writeMessage: invalid argument`,
		`2026/11/21 09:10:01 ERROR x`, `2026/11/21 09:10:01`, `2026/11/21 99:99:99 <`, `2026/1`,
		`failed for pod a/b on device 'sdb'`, `device '\`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var r record
		goStampBody(&r, b)
		if utf8.Valid(b) && !utf8.ValidString(r.msg) {
			t.Fatalf("message of valid input is not valid UTF-8: %q", r.msg)
		}
		_ = quotedDeviceName(string(b))
		_ = namespacedPod(string(b))
		p := NewParser(ref)
		_, _ = p.Parse(b)
	})
}

// Keys a record's text gives that are no storage object by their form,
// and mount(8)'s busy message that is no skipped operation.
func TestNotAnObjectAndMountBusy(t *testing.T) {
	cases := []struct {
		name string
		line string
		want want
		// server, path and volume are what must be left of those keys.
		server, path, volume string
	}{
		{"slog's source file is the writer's location, not a path (a record pasted as a quoted string)", `"time=2026-11-21T09:10:01.000Z level=ERROR source=/home/builder/src/drv/internal/app/app.go:300 msg=\"handler failed\" err=\"rpc error: code = Internal desc = failed to publish volume: exit status 1\" volume=vol-0a1b2c3d4e5f60718"`,
			want{ok: true, outcome: OutcomeFailed, keys: Keys{Handle: "vol-0a1b2c3d4e5f60718"}}, "", "", ""},
		{"a label ending in a colon is no server", `level=info ts=2026-11-21T09:10:01Z component=api msg="failed to attach volume" volume-id=4242 err="assigning failed, power cycle server id: 99 and retry"`,
			want{ok: true, level: LevelInfo, op: OpAttach, outcome: OutcomeFailed, keys: Keys{Handle: "4242"}}, "", "", ""},
		{"a field's name after the word volume is no volume", `level=info ts=2026-11-21T09:10:01Z component=api msg="attaching volume" volume-id=4242 err="attach failed: server is locked"`,
			want{ok: true, level: LevelInfo, op: OpAttach, outcome: OutcomeFailed, keys: Keys{Handle: "4242"}}, "", "", ""},
		{"a real server and path are kept", `E1121 09:10:01.000000       1 mount_linux.go:232] Mount failed: exit status 32 mounting 10.0.0.5:/exports/a on /var/lib/kubelet/pods/0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d/volumes/kubernetes.io~nfs/a`,
			want{ok: true, level: LevelError, op: OpMount, outcome: OutcomeFailed, exit: 32}, "10.0.0.5:/exports/a", "/var/lib/kubelet/pods/0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d/volumes/kubernetes.io~nfs/a", "a"},
		{"mount(8)'s busy output is a failure, not a skipped mount", `Output: mount: /var/lib/kubelet/plugins/kubernetes.io/csi/pv/pvc-5d1e2f3a-1b2c-4d5e-8f90-0a1b2c3d4e5f/globalmount: /dev/sdc already mounted or mount point busy.`,
			want{ok: true, op: OpMount, outcome: OutcomeFailed, errno: "EBUSY", keys: Keys{PV: "pvc-5d1e2f3a-1b2c-4d5e-8f90-0a1b2c3d4e5f", Device: "/dev/sdc"}}, "", "", ""},
		{"a mount its writer skipped as done stays a success", `I1121 09:10:01.000000       1 nodeserver.go:80] NodePublishVolume: volume pvc-5d1e2f3a-1b2c-4d5e-8f90-0a1b2c3d4e5f is already mounted, skipping`,
			want{ok: true, level: LevelInfo, op: OpPublish, outcome: OutcomeSucceeded, keys: Keys{PV: "pvc-5d1e2f3a-1b2c-4d5e-8f90-0a1b2c3d4e5f"}}, "", "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ev, ok := NewParser(ref).Parse([]byte(c.line))
			w := c.want
			if ok != w.ok {
				t.Errorf("ok=%v, want %v (%+v)", ok, w.ok, ev)
			}
			if w.level != LevelUnknown && ev.Level != w.level {
				t.Errorf("level %v, want %v", ev.Level, w.level)
			}
			if w.op != OpNone && ev.Op != w.op {
				t.Errorf("op %q, want %q", ev.Op, w.op)
			}
			if ev.Outcome != w.outcome {
				t.Errorf("outcome %v, want %v", ev.Outcome, w.outcome)
			}
			if w.errno != "" && ev.Err.Errno != w.errno {
				t.Errorf("errno %q, want %q", ev.Err.Errno, w.errno)
			}
			if w.exit != 0 && ev.Err.Exit != w.exit {
				t.Errorf("exit %d, want %d", ev.Err.Exit, w.exit)
			}
			for _, k := range []struct{ name, got, want string }{
				{"handle", ev.Keys.Handle, w.keys.Handle}, {"pv", ev.Keys.PV, w.keys.PV}, {"device", ev.Keys.Device, w.keys.Device},
				{"server", ev.Keys.Server, c.server}, {"path", ev.Keys.Path, c.path}, {"volume", ev.Keys.Volume, c.volume},
			} {
				if k.got != k.want && (k.want != "" || k.name == "server" || k.name == "volume") {
					t.Errorf("%s %q, want %q", k.name, k.got, k.want)
				}
			}
			if c.path == "" && reSourceFile.MatchString(ev.Keys.Path) {
				t.Errorf("path %q is a source file", ev.Keys.Path)
			}
		})
	}
}

// A share whose path the record ends with a colon keeps its server.
func TestShareBeforeColonIsAServer(t *testing.T) {
	k := Keys{Server: "//acct.file.core.windows.net/pvc-1:"}
	notAnObject("x", &k)
	if k.Server == "" {
		t.Error("share dropped")
	}
	k = Keys{Server: "id:"}
	notAnObject("x", &k)
	if k.Server != "" {
		t.Errorf("label %q kept as a server", k.Server)
	}
}

// A driver's line announcing a node call by its method ("NodePublishVolume:
// Starting Mount Volume x") makes the error that follows without a method
// of its own that call's; without the announcement it is a call whose
// method the log does not say.
func TestAnnouncedCallTakesItsError(t *testing.T) {
	announce := `time="2026-11-21T09:10:01+08:00" level=info msg="NodePublishVolume: Starting Mount Volume d-0a1b2c3d4e5f, source /var/lib/kubelet/plugins/kubernetes.io/csi/pv/pv-a/globalmount"`
	fail := `E1121 09:10:01.412652      10 utils.go:101] GRPC error: rpc error: code = Internal desc = stat /var/lib/kubelet/plugins/kubernetes.io/csi/pv/pv-a/globalmount: no such file or directory`
	p := NewParser(ref)
	p.Parse([]byte(announce))
	if ev, ok := p.Parse([]byte(fail)); !ok || ev.Op != OpPublish || ev.Outcome != OutcomeFailed {
		t.Errorf("after the announcement: ok=%v op %q outcome %v, want publish failed", ok, ev.Op, ev.Outcome)
	}
	if ev, _ := NewParser(ref).Parse([]byte(fail)); ev.Op != OpCSICall {
		t.Errorf("alone: op %q, want %q", ev.Op, OpCSICall)
	}
}
