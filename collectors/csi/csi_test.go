package csi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/collectors/csi"
	"github.com/nodesnap/nodesnap/engine/supervisor/supervisortest"
	"github.com/nodesnap/nodesnap/test/testkit"
)

// Pods of the fixture kubelet tree.
const (
	podA = "7d1e2b3c-1111-4a5b-9c8d-00000000000a" // its CSI volume lost "Published" (incident 004)
	podB = "7d1e2b3c-2222-4a5b-9c8d-00000000000b" // consistent, plus a broken vol_data.json and a .deleting~ leftover
	podC = "7d1e2b3c-3333-4a5b-9c8d-00000000000c" // published per the driver, not mounted
	vol1 = "0d3c7e10-6a1b-11ee-8c99-0242ac120001"
	vol2 = "0d3c7e10-6a1b-11ee-8c99-0242ac120002"
	vol3 = "0d3c7e10-6a1b-11ee-8c99-0242ac120003"
)

func volData(pv, handle string) string {
	return `{"attachmentID":"csi-` + pv + `","driverName":"hostpath.csi.k8s.io","nodeName":"node-1","specVolID":"` + pv + `","volumeHandle":"` + handle + `","volumeLifecycleMode":"Persistent"}`
}

// csiFixture builds a kubelet tree under a fake root and a fake /proc
// whose 1/mountinfo is testdata/csi/mountinfo. Sockets are made with
// mknod (git cannot hold them).
func csiFixture(t *testing.T) (root, proc string) {
	t.Helper()
	base := t.TempDir()
	root, proc = filepath.Join(base, "root"), filepath.Join(base, "proc")
	td := func(name string) string {
		b, err := os.ReadFile(filepath.Join("testdata", "csi", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	kl := "var/lib/kubelet/"
	files := map[string]string{
		"var/lib/csi-hostpath-data/state.json":                                                       td("state.json"),
		"var/lib/csi-other-data/state.json":                                                          td("state-truncated.json"),
		kl + "pods/" + podA + "/volumes/kubernetes.io~csi/pvc-aaa/vol_data.json":                     volData("pvc-aaa", vol1),
		kl + "pods/" + podA + "/volumes/kubernetes.io~csi/pvc-aaa/mount/":                            "",
		kl + "pods/" + podA + "/volumes/kubernetes.io~empty-dir/cache/":                              "",
		kl + "pods/" + podA + "/volumes/kubernetes.io~projected/kube-api-access-x7k2p/":              "",
		kl + "pods/" + podB + "/volumes/kubernetes.io~csi/pvc-bbb/vol_data.json":                     volData("pvc-bbb", vol2),
		kl + "pods/" + podB + "/volumes/kubernetes.io~csi/pvc-ccc/vol_data.json":                     volData("pvc-ccc", "x")[:40],
		kl + "pods/" + podB + "/volumes/kubernetes.io~csi/pvc-ddd.deleting~123456789/":               "",
		kl + "pods/" + podC + "/volumes/kubernetes.io~csi/pvc-eee/vol_data.json":                     volData("pvc-eee", vol3),
		kl + "plugins/kubernetes.io/csi/rbd.csi.ceph.com/5f2a9c0e7b1d/vol_data.json":                 `{"driverName":"rbd.csi.ceph.com","volumeHandle":"0001-0009-rook-ceph-0000000000000002-4e1f"}`,
		kl + "plugins/kubernetes.io/csi/rbd.csi.ceph.com/5f2a9c0e7b1d/globalmount/lost+found/inside": "never listed: a mountpoint is not entered",
		kl + "plugins/rbd.csi.ceph.com/":                                                             "",
		kl + "plugins/hostpath.csi.k8s.io/":                                                          "",
		kl + "plugins_registry/":                                                                     "",
		"../proc/1/mountinfo":                                                                        td("mountinfo"),
	}
	for name, content := range files {
		p := filepath.Join(root, name)
		if strings.HasSuffix(name, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []string{
		kl + "plugins/hostpath.csi.k8s.io/csi.sock",
		kl + "plugins/rbd.csi.ceph.com/csi.sock",
		kl + "plugins_registry/hostpath.csi.k8s.io-reg.sock",
		kl + "plugins_registry/rbd.csi.ceph.com-reg.sock",
	} {
		if err := unix.Mknod(filepath.Join(root, s), unix.S_IFSOCK|0o600, 0); err != nil {
			t.Fatalf("mknod socket %s: %v", s, err)
		}
	}
	return root, proc
}

func csiInventory(t *testing.T, b *supervisortest.Bundle) layout.CSIInventory {
	t.Helper()
	var inv layout.CSIInventory
	if err := json.Unmarshal(b.File(t, "csi/inventory.json"), &inv); err != nil {
		t.Fatalf("csi/inventory.json: %v", err)
	}
	return inv
}

func podVolume(t *testing.T, inv layout.CSIInventory, uid, vol string) layout.CSIPodVolume {
	t.Helper()
	for _, pv := range inv.PodVolumes {
		if pv.PodUID == uid && pv.Volume == vol {
			return pv
		}
	}
	t.Fatalf("inventory has no pod %s volume %s: %+v", uid, vol, inv.PodVolumes)
	return layout.CSIPodVolume{}
}

func isMounted(m *bool) bool { return m != nil && *m }

const stateGlobs = "--csi-state-glob=/var/lib/csi-hostpath-data/state.json,/var/lib/csi-*-data/*.json"

// The fixture tree of incident 004: the inventory ties pods, volumes,
// vol_data.json, the driver's state and the mount table together, finds
// the volume whose "Published" was lost while still mounted, and keeps a
// truncated state file raw while saying it is broken.
func TestCSIInventory(t *testing.T) {
	root, proc := csiFixture(t)
	supervisortest.Flags(t, "csi", stateGlobs)
	b := supervisortest.Collect(t, "csi", collectors.Common{Root: root, Proc: proc})
	if b.Res.Status != bundle.StatusOK {
		t.Fatalf("status %q (%s), want ok", b.Res.Status, b.Res.Error)
	}
	inv := csiInventory(t, b)
	if inv.KubeletDir != "/var/lib/kubelet" || inv.MountTableError != "" {
		t.Errorf("kubelet dir %q, mount table error %q", inv.KubeletDir, inv.MountTableError)
	}
	if len(inv.PodVolumes) != 7 {
		t.Errorf("%d pod volumes, want 7: %+v", len(inv.PodVolumes), inv.PodVolumes)
	}

	a := podVolume(t, inv, podA, "pvc-aaa")
	wantMount := "/var/lib/kubelet/pods/" + podA + "/volumes/kubernetes.io~csi/pvc-aaa/mount"
	if a.MountPath != wantMount || !isMounted(a.Mounted) || len(a.Mounts) != 1 || a.Mounts[0].Root != "/var/lib/csi-hostpath-data/"+vol1 {
		t.Errorf("pvc-aaa: %+v", a)
	}
	if a.VolData == nil || a.VolData.VolumeHandle != vol1 || a.VolData.DriverName != "hostpath.csi.k8s.io" || a.VolDataFile != "vol_data/"+podA+"/pvc-aaa.json" {
		t.Errorf("pvc-aaa vol_data: %+v file %q", a.VolData, a.VolDataFile)
	}
	if got := b.File(t, "csi/vol_data/"+podA+"/pvc-aaa.json"); string(got) != volData("pvc-aaa", vol1) {
		t.Errorf("vol_data copy %q", got)
	}
	if pv := podVolume(t, inv, podA, "kube-api-access-x7k2p"); !isMounted(pv.Mounted) || pv.MountPath != pv.Dir || pv.VolData != nil {
		t.Errorf("projected volume: %+v", pv)
	}
	if pv := podVolume(t, inv, podA, "cache"); pv.Mounted == nil || *pv.Mounted {
		t.Errorf("empty-dir volume: %+v", pv)
	}
	if pv := podVolume(t, inv, podB, "pvc-ccc"); pv.VolData != nil || !strings.Contains(pv.VolDataError, "not a JSON object") || pv.VolDataFile == "" {
		t.Errorf("broken vol_data.json: %+v", pv)
	}
	if pv := podVolume(t, inv, podB, "pvc-ddd.deleting~123456789"); !pv.DeletingLeftover || pv.VolDataError != "no vol_data.json" {
		t.Errorf(".deleting~ leftover: %+v", pv)
	}
	if pv := podVolume(t, inv, podC, "pvc-eee"); pv.Mounted == nil || *pv.Mounted {
		t.Errorf("pvc-eee: %+v", pv)
	}

	// The driver's state, parsed and cross-checked.
	if len(inv.StateFiles) != 2 {
		t.Fatalf("%d state files, want 2: %+v", len(inv.StateFiles), inv.StateFiles)
	}
	var hp, broken layout.CSIStateFile
	for _, sf := range inv.StateFiles {
		switch sf.Path {
		case "/var/lib/csi-hostpath-data/state.json":
			hp = sf
		case "/var/lib/csi-other-data/state.json":
			broken = sf
		}
	}
	if hp.Format != "csi-hostpath" || len(hp.Volumes) != 4 || hp.Snapshots != 1 || hp.ParseError != "" {
		t.Fatalf("hostpath state: %+v", hp)
	}
	states := map[string]string{}
	for _, v := range hp.Volumes {
		states[v.VolName] = v.PublishedState
	}
	if states["pvc-aaa"] != "null" || states["pvc-bbb"] != "set" || states["pvc-fff"] != "empty" {
		t.Errorf("published states %v", states)
	}
	if hp.Volumes[0].VolID != vol1 || len(hp.Volumes[0].MountedTargets) != 1 || hp.Volumes[0].MountedTargets[0] != wantMount {
		t.Errorf("vol-1: %+v", hp.Volumes[0])
	}
	if broken.Format != "invalid" || broken.ParseError == "" || broken.File != "state/var/lib/csi-other-data/state.json" {
		t.Errorf("truncated state file: %+v", broken)
	}
	raw, _ := os.ReadFile(filepath.Join("testdata", "csi", "state-truncated.json"))
	if got := b.File(t, "csi/state/var/lib/csi-other-data/state.json"); !bytes.Equal(got, raw) {
		t.Errorf("the truncated state file was not kept as it was: %q", got)
	}
	b.File(t, "csi/state/var/lib/csi-hostpath-data/state.json")
	if !strings.Contains(b.Notes(), "/var/lib/csi-other-data/state.json is malformed or truncated") {
		t.Errorf("the manifest does not flag the truncated state file:\n%s", b.Notes())
	}

	var lost, notMounted []layout.CSIFinding
	for _, f := range inv.Findings {
		switch f.Kind {
		case "published-lost":
			lost = append(lost, f)
		case "published-not-mounted":
			notMounted = append(notMounted, f)
		default:
			t.Errorf("unexpected finding %+v", f)
		}
	}
	if len(lost) != 1 || lost[0].VolumeID != vol1 || lost[0].TargetPath != wantMount || lost[0].PodUID != podA {
		t.Errorf("published-lost findings %+v, want one for %s at %s", lost, vol1, wantMount)
	}
	if len(notMounted) != 1 || notMounted[0].VolumeID != vol3 || notMounted[0].PodUID != podC {
		t.Errorf("published-not-mounted findings %+v", notMounted)
	}
	if !strings.Contains(b.Notes(), "incident 004") {
		t.Errorf("the finding is not in the manifest notes:\n%s", b.Notes())
	}

	// Plugin directories: sockets and json typed, mountpoints not entered.
	types := map[string]layout.CSIDirEntry{}
	for _, e := range append(inv.Plugins, inv.PluginsRegistry...) {
		types[e.Path] = e
	}
	kl := "/var/lib/kubelet/"
	for p, want := range map[string]string{
		kl + "plugins/hostpath.csi.k8s.io/csi.sock":                                  "socket",
		kl + "plugins_registry/hostpath.csi.k8s.io-reg.sock":                         "socket",
		kl + "plugins_registry/rbd.csi.ceph.com-reg.sock":                            "socket",
		kl + "plugins/kubernetes.io/csi/rbd.csi.ceph.com/5f2a9c0e7b1d/vol_data.json": "json",
		kl + "plugins/kubernetes.io/csi/rbd.csi.ceph.com/5f2a9c0e7b1d/globalmount":   "dir",
	} {
		if types[p].Type != want {
			t.Errorf("%s listed as %+v, want %s", p, types[p], want)
		}
	}
	gm := kl + "plugins/kubernetes.io/csi/rbd.csi.ceph.com/5f2a9c0e7b1d/globalmount"
	if !types[gm].Mountpoint {
		t.Errorf("globalmount not marked as a mountpoint")
	}
	if _, ok := types[gm+"/lost+found"]; ok {
		t.Errorf("the walk entered a mountpoint")
	}
	if len(inv.StagingVolumes) != 1 || !isMounted(inv.StagingVolumes[0].Mounted) || inv.StagingVolumes[0].VolData == nil ||
		inv.StagingVolumes[0].VolData.DriverName != "rbd.csi.ceph.com" {
		t.Errorf("staging volumes %+v", inv.StagingVolumes)
	}
	b.File(t, "csi/vol_data/staging/rbd.csi.ceph.com/5f2a9c0e7b1d.json")
}

// Nothing CSI on the node: unsupported.
func TestCSIAbsent(t *testing.T) {
	supervisortest.Flags(t, "csi")
	b := supervisortest.Collect(t, "csi", collectors.Common{Root: t.TempDir()})
	if b.Res.Status != bundle.StatusUnsupported {
		t.Errorf("status %q (%s), want unsupported", b.Res.Status, b.Res.Error)
	}
}

// A CSI plugin directory on a hung FUSE mount that the mount table does not
// show (it was mounted in the plugin's own namespace) costs one probe: the
// rest of the inventory is complete and the manifest names the hung item.
func TestCSIHungPluginDir(t *testing.T) {
	testkit.RequireFUSE(t)
	root, proc := csiFixture(t)
	b := csiHungRun(t, root, proc, "/var/lib/kubelet/plugins/hung.csi.example.com", "csi-hung")
	inv := csiInventory(t, b)
	if len(inv.PodVolumes) != 7 || len(inv.Findings) != 2 || len(inv.StateFiles) != 2 {
		t.Errorf("inventory incomplete after the hang: %d volumes, %d findings, %d state files", len(inv.PodVolumes), len(inv.Findings), len(inv.StateFiles))
	}
	found := false
	for _, e := range inv.Plugins {
		if e.Path == "/var/lib/kubelet/plugins/hung.csi.example.com" && e.Type == "dir" {
			found = true
		}
	}
	if !found {
		t.Errorf("the hung directory is not listed as an entry of plugins/")
	}
}

// csiHungRun runs the csi collector over the fixture with a hung FUSE mount
// at hostDir and checks what every such run must show: partial, exactly
// that directory named hung, and about one probe's time spent on it (plus
// the grace a killed worker stuck in FUSE gets).
func csiHungRun(t *testing.T, root, proc, hostDir, subtype string) *supervisortest.Bundle {
	t.Helper()
	testkit.HungFUSE(t, filepath.Join(root, filepath.FromSlash(hostDir)), testkit.FUSEStartHung(), testkit.FUSESubtype(subtype))
	supervisortest.Flags(t, "csi", stateGlobs)
	const probe = time.Second
	b := supervisortest.Collect(t, "csi", collectors.Common{Root: root, Proc: proc, ProbeTimeout: probe})
	if b.Res.Status != bundle.StatusPartial {
		t.Errorf("status %q (%s), want partial", b.Res.Status, b.Res.Error)
	}
	if len(b.Res.HungItems) != 1 || !strings.HasSuffix(b.Res.HungItems[0].Target, hostDir) {
		t.Fatalf("hung items %+v, want exactly %s", b.Res.HungItems, hostDir)
	}
	if limit := probe + 10*time.Second; b.Res.DurationSeconds > limit.Seconds() {
		t.Errorf("took %.1fs, want about one %s probe", b.Res.DurationSeconds, probe)
	}
	return b
}

func FuzzParseCSIState(f *testing.F) {
	for _, name := range []string{"state.json", "state-truncated.json"} {
		b, err := os.ReadFile(filepath.Join("testdata", "csi", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"volumes":[{"volid":"x","published":"/a"}],"Snapshots":null}`))
	f.Add([]byte(`{"Volumes":null}`))
	f.Add([]byte(`{"Volumes":[{"Published":false,"Staged":true}]}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := csi.ParseCSIState(data)
		switch {
		case err != nil && st.Format != "invalid":
			t.Fatalf("error %v with format %q", err, st.Format)
		case err == nil && st.Format != "csi-hostpath" && st.Format != "json":
			t.Fatalf("format %q", st.Format)
		case err == nil && !json.Valid(data):
			t.Fatalf("accepted invalid JSON")
		}
		for _, v := range st.Volumes {
			switch v.PublishedState {
			case "set":
				if len(v.Published) == 0 {
					t.Fatalf("set without paths")
				}
			case "null", "false", "empty", "missing", "other":
				if len(v.Published) != 0 {
					t.Fatalf("%s with paths", v.PublishedState)
				}
			default:
				t.Fatalf("published state %q", v.PublishedState)
			}
		}
	})
}

func FuzzParseVolData(f *testing.F) {
	f.Add([]byte(volData("pvc-1", "h")))
	f.Add([]byte(`{"volumeHandle":1,"driverName":null}`))
	f.Add([]byte(`{"driverName":"x"`))
	f.Fuzz(func(t *testing.T, data []byte) {
		vd, err := csi.ParseVolData(data)
		if err != nil && vd != (layout.CSIVolData{}) {
			t.Fatalf("error %v with data %+v", err, vd)
		}
		if err == nil && !json.Valid(data) {
			t.Fatalf("accepted invalid JSON")
		}
	})
}

// A hostpath driver's state with 1000 volumes.
func BenchmarkParseCSIState(b *testing.B) {
	var vols []string
	for i := 0; i < 1000; i++ {
		vols = append(vols, fmt.Sprintf(`{"VolName":"pvc-%d","VolID":"%08d-6a1b-11ee-8c99-0242ac120001","VolSize":1073741824,"VolPath":"/csi-data-dir/%08d","VolAccessType":0,"NodeID":"node-1","Staged":null,"Published":["/var/lib/kubelet/pods/%08d-1111-4a5b-9c8d-00000000000a/volumes/kubernetes.io~csi/pvc-%d/mount"]}`, i, i, i, i, i))
	}
	data := []byte(`{"Volumes":[` + strings.Join(vols, ",") + `],"Snapshots":[]}`)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if st, err := csi.ParseCSIState(data); err != nil || len(st.Volumes) != 1000 {
			b.Fatal(err)
		}
	}
}
