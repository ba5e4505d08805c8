package events

import "testing"

// A dumped Go value's field names are keys, not verbs: the kubelet's
// "Unhandled Error" record of a container that cannot start writes its
// whole spec (VolumeMounts, MountPath, MountPropagation) on the lines of
// a multi-line value; none of them is a mount that failed. A CamelCase
// verb outside a struct's fields is still the operation. The lines are
// written in the kubelet's form with made-up objects.
func TestStructDumpFieldsAreNotOperations(t *testing.T) {
	cases := []struct {
		name string
		line string
		ok   bool
		op   Op
	}{
		{name: "a container spec's volume mounts on a value line", ok: false, op: OpNone,
			line: `Mar 02 10:00:00 worker-2 kubelet[4121]:         ],Args:[],WorkingDir:,Env:[]EnvVar{},VolumeMounts:[]VolumeMount{VolumeMount{Name:cache,ReadOnly:false,MountPath:/cache,SubPath:,MountPropagation:nil,},},TerminationMessagePath:/dev/termination-log,ImagePullPolicy:IfNotPresent,} start failed in pod agent-7xk2p_infra(0c7e2f1a-5b3d-4e6f-8a9b-1c2d3e4f5a6b): CreateContainerConfigError: secret "agent-token" not found`},
		{name: "a Go value's field on a single line", ok: false, op: OpNone,
			line: `E0302 10:00:00.123456    4121 kuberuntime_manager.go:1274] "Unhandled Error" err="init container &Container{Name:setup,MountPath:/data,} start failed: CreateContainerConfigError: configmap \"setup\" not found" logger="UnhandledError"`},
		{name: "a CamelCase verb that is not a field still names the operation", ok: true, op: OpMount,
			line: `E0302 10:00:00.123456    4121 csi_attacher.go:374] kubernetes.io/csi: attacher.MountDevice failed to create newCsiDriverClient: driver name disk.example.com not found in the list of registered CSI drivers, volume pvc-0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ev, ok := NewParser(ref).Parse([]byte(c.line))
			if ok != c.ok || ev.Op != c.op {
				t.Fatalf("ok=%v op=%q, want ok=%v op=%q (event %+v)", ok, ev.Op, c.ok, c.op, ev)
			}
		})
	}
}

func TestStructField(t *testing.T) {
	cases := []struct {
		text string
		i, j int
		want bool
	}{
		{"&Container{MountPath:/x}", 11, 20, true},
		{"a,MountPath:/x", 2, 11, true},
		{"attacher.MountDevice failed", 9, 20, false},
		{"MountDevice: failed", 0, 11, false},
		{"x MountDevice:", 2, 13, false},
		{"{MountPath", 1, 10, false},
	}
	for _, c := range cases {
		if got := structField(c.text, c.i, c.j); got != c.want {
			t.Errorf("structField(%q, %d, %d) = %v, want %v", c.text, c.i, c.j, got, c.want)
		}
	}
}
