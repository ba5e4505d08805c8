package csi_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/collectors/csi"
	"github.com/nodesnap/nodesnap/engine/supervisor/supervisortest"
)

type ociMount struct{ dst, src string }

// ociConfig is a container's config.json as a runtime writes it: mounts,
// pod annotations (containerd's or CRI-O's keys, or none), cgroups path.
func ociConfig(t testing.TB, ann map[string]string, cgroups string, mounts ...ociMount) []byte {
	t.Helper()
	type m struct {
		Destination string   `json:"destination"`
		Type        string   `json:"type"`
		Source      string   `json:"source"`
		Options     []string `json:"options"`
	}
	ms := []m{
		{"/proc", "proc", "proc", []string{"nosuid", "noexec", "nodev"}},
		{"/etc/hosts", "bind", "/var/lib/kubelet/pods/x/etc-hosts", []string{"rbind", "rprivate", "rw"}},
		{"/dev/termination-log", "bind", "/var/lib/kubelet/pods/x/containers/c/1a2b", []string{"rbind", "rprivate", "rw"}},
	}
	for _, x := range mounts {
		ms = append(ms, m{x.dst, "bind", x.src, []string{"rbind", "rslave", "rw"}})
	}
	cfg := map[string]any{
		"ociVersion":  "1.1.0",
		"process":     map[string]any{"args": []string{"/plugin"}, "env": []string{"PATH=/bin", "API_TOKEN=s3cr3t"}},
		"mounts":      ms,
		"annotations": ann,
		"linux":       map[string]any{"cgroupsPath": cgroups},
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func containerdAnn(uid, pod, ns, container, typ string) map[string]string {
	return map[string]string{
		"io.kubernetes.cri.container-type":    typ,
		"io.kubernetes.cri.container-name":    container,
		"io.kubernetes.cri.sandbox-id":        "9d2a6e0c5a1b",
		"io.kubernetes.cri.sandbox-name":      pod,
		"io.kubernetes.cri.sandbox-namespace": ns,
		"io.kubernetes.cri.sandbox-uid":       uid,
	}
}

func TestParsePluginContainer(t *testing.T) {
	const uid = "7c0e2f4a-1b3d-4e5f-8a9b-0c1d2e3f4a5b"
	crio := map[string]string{"io.kubernetes.pod.uid": uid, "io.kubernetes.pod.name": "portworx-x2k", "io.kubernetes.pod.namespace": "portworx",
		"io.kubernetes.container.name": "portworx", "io.kubernetes.cri-o.ContainerType": "container"}
	for _, c := range []struct {
		name   string
		cfg    []byte
		kdir   string
		ok     bool
		reason string
		pod    string
	}{
		{"registrar (containerd)", ociConfig(t, containerdAnn(uid, "node-plugin-abcde", "storage", "registrar", "container"), "",
			ociMount{"/plugin", "/var/lib/kubelet/plugins/x.example.com"}, ociMount{"/registration", "/var/lib/kubelet/plugins_registry"}),
			"/var/lib/kubelet", true, "plugin registration directory (/var/lib/kubelet/plugins_registry at /registration)", "storage/node-plugin-abcde/registrar"},
		{"driver: its socket directory (CRI-O)", ociConfig(t, crio, "", ociMount{"/csi", "/var/lib/kubelet/plugins/pxd.portworx.com"}),
			"/var/lib/kubelet", true, "plugins directory (/var/lib/kubelet/plugins/pxd.portworx.com at /csi)", "portworx/portworx-x2k/portworx"},
		{"driver: another kubelet root", ociConfig(t, crio, "", ociMount{"/var/data/kubelet/plugins", "/var/data/kubelet/plugins"}),
			"/var/data/kubelet", true, "plugins directory (/var/data/kubelet/plugins at", "portworx/portworx-x2k/portworx"},
		{"registration elsewhere, default kubelet dir", ociConfig(t, crio, "", ociMount{"/reg", "/data/kubelet/plugins_registry/"}),
			"/var/lib/kubelet", true, "registration directory (/data/kubelet/plugins_registry at /reg)", "portworx/portworx-x2k/portworx"},
		{"a socket file", ociConfig(t, crio, "", ociMount{"/run/csi/csi.sock", "/srv/driver/csi.sock"}),
			"/var/lib/kubelet", true, "a CSI socket (/srv/driver/csi.sock at /run/csi/csi.sock)", "portworx/portworx-x2k/portworx"},
		{"no annotations: the pod from the systemd cgroup", ociConfig(t, nil,
			"kubepods-burstable-pod7c0e2f4a_1b3d_4e5f_8a9b_0c1d2e3f4a5b.slice:cri-dockerd:0d1e", ociMount{"/registration", "/var/lib/kubelet/plugins_registry"}),
			"/var/lib/kubelet", true, "registration", "//"},
		{"no annotations: the pod from the cgroupfs path", ociConfig(t, nil,
			"/kubepods/besteffort/pod7C0E2F4A-1B3D-4E5F-8A9B-0C1D2E3F4A5B/0d1e", ociMount{"/registration", "/var/lib/kubelet/plugins_registry"}),
			"/var/lib/kubelet", true, "registration", "//"},
		{"no pod at all", ociConfig(t, nil, "/system.slice/x", ociMount{"/registration", "/var/lib/kubelet/plugins_registry"}), "/var/lib/kubelet", false, "", ""},
		{"a pod using a CSI volume is no plugin", ociConfig(t, containerdAnn(uid, "web", "default", "nginx", "container"), "",
			ociMount{"/data", "/var/lib/kubelet/pods/" + uid + "/volumes/kubernetes.io~csi/pvc-1/mount"}, ociMount{"/cache", "/var/lib/plugins"}),
			"/var/lib/kubelet", false, "", ""},
		{"the sandbox", ociConfig(t, containerdAnn(uid, "node-plugin-abcde", "storage", "", "sandbox"), "",
			ociMount{"/registration", "/var/lib/kubelet/plugins_registry"}), "/var/lib/kubelet", false, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			pc, ok, err := csi.ParsePluginContainer(c.cfg, c.kdir)
			if err != nil || ok != c.ok {
				t.Fatalf("ok %v, err %v; want ok %v", ok, err, c.ok)
			}
			if !ok {
				return
			}
			if pc.PodUID != uid || !strings.Contains(pc.Reason, c.reason) || pc.Namespace+"/"+pc.Pod+"/"+pc.Container != c.pod {
				t.Errorf("got %+v; want pod %s %s, reason with %q", pc, uid, c.pod, c.reason)
			}
		})
	}
	for _, bad := range []string{"", "{", "[1,2]", `{"mounts":"x"}`} {
		if _, ok, err := csi.ParsePluginContainer([]byte(bad), "/var/lib/kubelet"); ok || err == nil {
			t.Errorf("%q: ok %v, err %v; want an error", bad, ok, err)
		}
	}
}

// A CSI node plugin whose pod and containers carry no name that says so is
// found by what its containers mount (their OCI configs in containerd's
// and CRI-O's state directories), and its containers' logs are kept; a pod
// that only uses a CSI volume is not.
func TestCSIPluginPodsFoundByMounts(t *testing.T) {
	root, proc := csiFixture(t)
	const (
		uid    = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
		crioID = "5e6f7a8b-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
		appUID = "1a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
	)
	files := map[string][]byte{
		"run/containerd/io.containerd.runtime.v2.task/k8s.io/aaa/config.json": ociConfig(t, containerdAnn(uid, "node-storage-plugin-x7k2q", "storage", "plugin", "container"), "",
			ociMount{"/plugin", "/var/lib/kubelet/plugins/vol.example.com"}, ociMount{"/var/lib/kubelet/pods", "/var/lib/kubelet/pods"}),
		"run/containerd/io.containerd.runtime.v2.task/k8s.io/bbb/config.json": ociConfig(t, containerdAnn(uid, "node-storage-plugin-x7k2q", "storage", "registrar", "container"), "",
			ociMount{"/plugin", "/var/lib/kubelet/plugins/vol.example.com"}, ociMount{"/registration", "/var/lib/kubelet/plugins_registry"}),
		"run/containerd/io.containerd.runtime.v2.task/k8s.io/ccc/config.json": ociConfig(t, containerdAnn(uid, "node-storage-plugin-x7k2q", "storage", "", "sandbox"), ""),
		"run/containerd/io.containerd.runtime.v2.task/k8s.io/ddd/config.json": ociConfig(t, containerdAnn(appUID, "app-0", "default", "app", "container"), "",
			ociMount{"/data", "/var/lib/kubelet/pods/" + appUID + "/volumes/kubernetes.io~csi/pvc-1/mount"}),
		"run/containerd/io.containerd.runtime.v2.task/k8s.io/eee/config.json": []byte("{not json"),
		"run/containers/storage/overlay-containers/fff/userdata/config.json": ociConfig(t, map[string]string{"io.kubernetes.pod.uid": crioID,
			"io.kubernetes.pod.name": "agent-9", "io.kubernetes.pod.namespace": "vendor", "io.kubernetes.container.name": "agent"}, "",
			ociMount{"/csi", "/var/lib/kubelet/plugins/agent.example.com"}),
		"var/log/pods/storage_node-storage-plugin-x7k2q_" + uid + "/plugin/0.log":    []byte(criLines(0, 2, "nodeserver.go:99] plugin line")),
		"var/log/pods/storage_node-storage-plugin-x7k2q_" + uid + "/registrar/0.log": []byte(criLines(0, 2, "main.go:90] registrar line")),
		"var/log/pods/vendor_agent-9_" + crioID + "/agent/0.log":                     []byte(criLines(0, 2, "agent line")),
		"var/log/pods/default_app-0_" + appUID + "/app/0.log":                        []byte(criLines(0, 2, "app line")),
	}
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A symbolic link where a config belongs is not followed.
	outside := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(outside, ociConfig(t, containerdAnn(appUID, "app-0", "default", "app", "container"), "",
		ociMount{"/registration", "/var/lib/kubelet/plugins_registry"}), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, "run/containerd/io.containerd.runtime.v2.task/k8s.io/ggg")
	if err := os.MkdirAll(link, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(link, "config.json")); err != nil {
		t.Fatal(err)
	}
	// Nor is a container directory that is a link.
	if err := os.Symlink(filepath.Dir(outside), filepath.Join(root, "run/containerd/io.containerd.runtime.v2.task/k8s.io/hhh")); err != nil {
		t.Fatal(err)
	}

	// Nor a runtime's directory that is an absolute link: it is resolved
	// inside the root, where its target does not exist.
	escape := t.TempDir()
	escCfg := filepath.Join(escape, "iii", "config.json")
	if err := os.MkdirAll(filepath.Dir(escCfg), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(escCfg, ociConfig(t, containerdAnn(appUID, "app-0", "default", "app", "container"), "",
		ociMount{"/registration", "/var/lib/kubelet/plugins_registry"}), 0o644); err != nil {
		t.Fatal(err)
	}
	k3s := filepath.Join(root, "run/k3s/containerd/io.containerd.runtime.v2.task/k8s.io")
	if err := os.MkdirAll(filepath.Dir(k3s), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(escape, k3s); err != nil {
		t.Fatal(err)
	}

	supervisortest.Flags(t, "csi", stateGlobs)
	b := supervisortest.Collect(t, "csi", collectors.Common{Root: root, Proc: proc})
	if b.Res.Status != bundle.StatusOK {
		t.Fatalf("status %q (%s), want ok", b.Res.Status, b.Res.Error)
	}
	inv := csiInventory(t, b)
	var got []string
	for _, pl := range inv.PodLogs {
		got = append(got, pl.Namespace+"/"+pl.Pod+"/"+pl.Container)
	}
	want := "storage/node-storage-plugin-x7k2q/plugin storage/node-storage-plugin-x7k2q/registrar vendor/agent-9/agent"
	if strings.Join(got, " ") != want {
		t.Errorf("containers kept:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), want)
	}
	for _, c := range []string{"plugin", "registrar"} {
		pl := podLog(t, inv, "node-storage-plugin-x7k2q", c)
		if !strings.Contains(pl.Match, `container "registrar" mounts the kubelet's plugin registration directory`) {
			t.Errorf("%s: match %q, want the registrar's registration mount", c, pl.Match)
		}
		if len(pl.Files) != 1 || pl.Files[0].File == "" {
			t.Errorf("%s: files %+v", c, pl.Files)
		}
	}
	if got := b.File(t, "csi/podlogs/storage_node-storage-plugin-x7k2q/registrar/0.log"); !strings.Contains(string(got), "registrar line") {
		t.Errorf("registrar log kept as %q", got)
	}
	if pl := podLog(t, inv, "agent-9", "agent"); !strings.Contains(pl.Match, "plugins directory (/var/lib/kubelet/plugins/agent.example.com at /csi)") {
		t.Errorf("CRI-O container: match %q", pl.Match)
	}
	errs := strings.Join(inv.Errors, "\n")
	if !strings.Contains(errs, "eee/config.json: not an OCI config") || !strings.Contains(errs, "ggg/config.json") {
		t.Errorf("errors %q: want the unreadable config and the link reported", errs)
	}
}

func FuzzParsePluginContainer(f *testing.F) {
	f.Add(ociConfig(f, containerdAnn("0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d", "p", "n", "c", "container"), "",
		ociMount{"/registration", "/var/lib/kubelet/plugins_registry"}), "/var/lib/kubelet")
	f.Add(ociConfig(f, nil, "kubepods-pod0a1b2c3d_4e5f_4a6b_8c7d_9e0f1a2b3c4d.slice", ociMount{"/csi", "/var/lib/kubelet/plugins/x"}), "")
	f.Add([]byte(`{"mounts":[{"source":"csi.sock","destination":""}],"linux":null}`), "/")
	f.Fuzz(func(t *testing.T, data []byte, kdir string) {
		pc, ok, err := csi.ParsePluginContainer(data, kdir)
		if err != nil && ok {
			t.Fatalf("ok with an error: %v", err)
		}
		if ok && (pc.PodUID == "" || pc.Reason == "") {
			t.Fatalf("a plugin without a pod or a reason: %+v", pc)
		}
		_ = fmt.Sprint(pc)
	})
}
