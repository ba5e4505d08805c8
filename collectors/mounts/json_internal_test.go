package mounts

import (
	"encoding/json"
	"testing"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/internal/procfs"
)

// appendMount must write exactly what encoding/json writes: readers decode
// mounts.json with encoding/json, and the bytes are compared here rather
// than trusted.
func TestAppendMountIsMarshal(t *testing.T) {
	weird := []string{"", "/", "plain", `quo"te`, `back\slash`, "tab\there", "nl\nx", "cr\rx", "\x00\x01\x1f\x7f", "<html>&amp;",
		"caf\u00e9", "\u2028\u2029", "bad\xffutf8\xc3", "emoji \U0001F600", "\b\f"}
	base := layout.NamespaceMount{
		Mount: procfs.Mount{ID: 25, ParentID: 1, Major: 253, Minor: 4294967295, Root: "/", MountPoint: "/var/lib/kubelet/pods/x/volumes/kubernetes.io~csi/pvc-1/mount",
			Options: []string{"rw", "relatime"}, FSType: "fuse.ceph-fuse", Source: "ceph-fuse", SuperOptions: "rw,user_id=0"},
		PropagationType: "private", Class: "fuse",
	}
	cases := []layout.NamespaceMount{base}
	for _, w := range weird {
		m := base
		m.Root, m.MountPoint, m.FSType, m.Source, m.SuperOptions, m.PropagationType, m.Class = w, w, w, w, w, w, w
		m.Options = []string{w, w}
		m.Optional = []string{w}
		cases = append(cases, m)
	}
	for _, p := range []procfs.Propagation{{Shared: 5}, {Master: 3}, {Shared: 1, Master: 2, PropagateFrom: 7}, {Unbindable: true}, {Master: -1, Unbindable: true}} {
		m := base
		m.Propagation = p
		m.Optional = []string{"shared:5"}
		cases = append(cases, m)
	}
	nilOpts := base
	nilOpts.Options, nilOpts.Optional = nil, []string{}
	negative := base
	negative.ID, negative.ParentID = -1, -2147483648
	cases = append(cases, nilOpts, negative)
	for i := range cases {
		want, err := json.Marshal(&cases[i])
		if err != nil {
			t.Fatal(err)
		}
		if got := appendMount(nil, &cases[i]); string(got) != string(want) {
			t.Errorf("case %d:\n got %s\nwant %s", i, got, want)
		}
	}
}

func FuzzAppendMountIsMarshal(f *testing.F) {
	f.Add("/", "/mnt", "ext4", "/dev/sda1", "rw", "rw,relatime", 3, 0, true)
	f.Add("<&>", "\u2028", "bad\xff", "\x00", "", "", 0, 9, false)
	f.Fuzz(func(t *testing.T, root, mp, fstype, source, opt, super string, shared, master int, unbind bool) {
		m := layout.NamespaceMount{Mount: procfs.Mount{ID: shared, ParentID: master, Root: root, MountPoint: mp, FSType: fstype, Source: source,
			Options: []string{opt}, Optional: []string{opt, super}, SuperOptions: super,
			Propagation: procfs.Propagation{Shared: shared, Master: master, Unbindable: unbind}}, PropagationType: opt, Class: fstype}
		want, err := json.Marshal(&m)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendMount(nil, &m); string(got) != string(want) {
			t.Errorf("\n got %s\nwant %s", got, want)
		}
	})
}
