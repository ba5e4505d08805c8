package runtime_test

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	criapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/engine/supervisor/supervisortest"
)

// criItem is the summary's item of one CRI method (by its last part).
func criItem(t *testing.T, rt layout.RuntimeStatus, method string) layout.RuntimeItem {
	t.Helper()
	for _, it := range rt.Items {
		if strings.HasSuffix(it.Method, "/"+method) {
			return it
		}
	}
	t.Fatalf("%s: no item for CRI method %s in %+v", rt.Name, method, rt.Items)
	return layout.RuntimeItem{}
}

// A real containerd with its CRI plugin, and no client program at all (as
// in nodesnap's own image): the CRI API lists pods, containers and images,
// reports its status and version, and the run is ok.
func TestRuntimeCRIContainerd(t *testing.T) {
	c := startContainerd(t, true)
	importSleeperImage(t, c)
	pod := runTestPod(t, c)
	none := t.TempDir()
	t.Setenv("PATH", t.TempDir())
	supervisortest.Flags(t, "runtime", "--containerd-config", c.config,
		"--crio-socket", filepath.Join(none, "crio.sock"), "--docker-socket", filepath.Join(none, "docker.sock"))
	b := supervisortest.Collect(t, "runtime", collectors.Common{})
	if b.Res.Status != bundle.StatusOK {
		t.Fatalf("status %q (%s), want ok", b.Res.Status, b.Res.Error)
	}

	var ver struct {
		Version, RuntimeName, RuntimeVersion, RuntimeApiVersion string
	}
	if err := json.Unmarshal(b.File(t, "runtime/containerd/cri-version.json"), &ver); err != nil {
		t.Fatalf("cri-version.json: %v", err)
	}
	if ver.RuntimeName != "containerd" || ver.RuntimeVersion == "" || ver.RuntimeApiVersion != "v1" {
		t.Errorf("cri-version.json = %+v, want containerd speaking v1", ver)
	}
	// The pod and its container, as crictl would show them.
	var pods struct {
		Items []struct {
			Id       string
			Metadata struct{ Name, Uid, Namespace string }
			State    string
			Labels   map[string]string
		}
	}
	if err := json.Unmarshal(b.File(t, "runtime/containerd/cri-pods.json"), &pods); err != nil || len(pods.Items) != 1 {
		t.Fatalf("cri-pods.json (%v): %s", err, b.File(t, "runtime/containerd/cri-pods.json"))
	}
	if p := pods.Items[0]; p.Id != pod.SandboxID || p.Metadata.Uid != pod.UID || p.Metadata.Namespace != pod.Namespace || p.Metadata.Name != pod.Name ||
		p.State != "SANDBOX_READY" || p.Labels["app"] != "writer" {
		t.Errorf("cri-pods.json: %+v, want %+v ready", p, pod)
	}
	var cs struct {
		Containers []struct {
			Id, PodSandboxId, State string
			Metadata                struct{ Name string }
			Image                   struct{ Image string }
		}
	}
	if err := json.Unmarshal(b.File(t, "runtime/containerd/cri-containers.json"), &cs); err != nil || len(cs.Containers) != 1 {
		t.Fatalf("cri-containers.json (%v): %s", err, b.File(t, "runtime/containerd/cri-containers.json"))
	}
	if ct := cs.Containers[0]; ct.Id != pod.ContainerID || ct.PodSandboxId != pod.SandboxID || ct.State != "CONTAINER_RUNNING" || ct.Metadata.Name != "writer" {
		t.Errorf("cri-containers.json: %+v, want %+v running", ct, pod)
	}
	if imgs := string(b.File(t, "runtime/containerd/cri-images.json")); !strings.Contains(imgs, testImage) {
		t.Errorf("cri-images.json does not list %s: %s", testImage, imgs)
	}
	// Each container's status: its mounts, which the list does not have.
	var sts struct {
		Statuses []struct {
			Id, State string
			Mounts    []struct {
				ContainerPath, HostPath string
				Readonly                bool
			}
		}
	}
	if err := json.Unmarshal(b.File(t, "runtime/containerd/cri-container-status.json"), &sts); err != nil || len(sts.Statuses) != 1 {
		t.Fatalf("cri-container-status.json (%v): %s", err, b.File(t, "runtime/containerd/cri-container-status.json"))
	}
	if st := sts.Statuses[0]; st.Id != pod.ContainerID || st.State != "CONTAINER_RUNNING" || len(st.Mounts) != 1 ||
		st.Mounts[0].ContainerPath != "/data" || st.Mounts[0].HostPath != c.dir || !st.Mounts[0].Readonly {
		t.Errorf("cri-container-status.json: %+v", st)
	}
	var stats struct {
		Stats []struct{ Attributes struct{ Id string } }
	}
	if err := json.Unmarshal(b.File(t, "runtime/containerd/cri-container-stats.json"), &stats); err != nil || len(stats.Stats) != 1 || stats.Stats[0].Attributes.Id != pod.ContainerID {
		t.Errorf("cri-container-stats.json (%v): %s", err, b.File(t, "runtime/containerd/cri-container-stats.json"))
	}
	var fs struct {
		ImageFilesystems []struct {
			FsId struct{ Mountpoint string }
		}
	}
	if err := json.Unmarshal(b.File(t, "runtime/containerd/cri-imagefs.json"), &fs); err != nil || len(fs.ImageFilesystems) == 0 ||
		!strings.HasPrefix(fs.ImageFilesystems[0].FsId.Mountpoint, c.dir) {
		t.Errorf("cri-imagefs.json does not name the test's own root (%v): %s", err, b.File(t, "runtime/containerd/cri-imagefs.json"))
	}
	// The verbose status: conditions, and containerd's configuration
	// decoded from its JSON string, registry credential removed.
	var st struct {
		Status struct {
			Conditions []struct {
				Type   string
				Status bool
			}
		}
		Info map[string]json.RawMessage
	}
	if err := json.Unmarshal(b.File(t, "runtime/containerd/cri-status.json"), &st); err != nil {
		t.Fatalf("cri-status.json: %v", err)
	}
	if len(st.Status.Conditions) == 0 {
		t.Errorf("cri-status.json has no conditions")
	}
	var cfg struct {
		ContainerdRootDir string
		Registry          struct {
			Configs map[string]struct {
				Auth map[string]string
			}
		}
	}
	if err := json.Unmarshal(st.Info["config"], &cfg); err != nil {
		t.Fatalf("cri-status.json info.config is not an object: %v: %.300s", err, st.Info["config"])
	}
	if cfg.ContainerdRootDir != filepath.Join(c.dir, "root") {
		t.Errorf("info.config.containerdRootDir = %q", cfg.ContainerdRootDir)
	}
	if a := cfg.Registry.Configs["registry.example.com"].Auth; a["username"] != "robot" || a["password"] != "[REDACTED]" {
		t.Errorf("registry auth in cri-status.json = %v, want the user kept and the password redacted", a)
	}
	supervisortest.AssertAbsent(t, b, registryPassword)

	ctd := runtimeSummary(t, b)["containerd"]
	if !ctd.Listed || ctd.CRIRuntimeName != "containerd" || ctd.CRIAPIVersion != "v1" {
		t.Errorf("containerd summary %+v", ctd)
	}
	for _, m := range []string{"Version", "Status", "ListPodSandbox", "ListContainers", "ListImages", "ImageFsInfo", "ListContainerStats", "ContainerStatus"} {
		it := criItem(t, ctd, m)
		if it.Error != "" || it.Skipped != "" || it.File == "" || it.DurationSeconds <= 0 || it.URL != "unix://"+c.sock {
			t.Errorf("%s: %+v", m, it)
		}
	}
	if !strings.Contains(b.Notes(), "ctr is not installed here") || !strings.Contains(b.Notes(), "listed by other means") {
		t.Errorf("notes do not say ctr is missing and not needed:\n%s", b.Notes())
	}
}

// A socket that accepts and never answers costs one request deadline,
// not one per CRI call, and the run is partial, saying why.
func TestRuntimeCRIHung(t *testing.T) {
	dir, err := os.MkdirTemp("", "nscri-") // short: unix socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "c.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c) // held open, never read nor written
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-accepted
		for _, c := range conns {
			c.Close()
		}
	})
	t.Setenv("PATH", t.TempDir())
	const timeout = 3 * time.Second
	supervisortest.Flags(t, "runtime", "--containerd-config", filepath.Join(dir, "none.toml"), "--containerd-socket", sock,
		"--containerd-debug-socket", filepath.Join(dir, "none.sock"), "--runtime-request-timeout", timeout.String(),
		"--crio-socket", filepath.Join(dir, "none"), "--docker-socket", filepath.Join(dir, "none"))
	start := time.Now()
	b := supervisortest.Collect(t, "runtime", collectors.Common{})
	took := time.Since(start)
	if b.Res.Status != bundle.StatusPartial || !strings.Contains(b.Res.Error, "containerd's socket") ||
		!strings.Contains(b.Res.Error, "no answer within 3s") {
		t.Fatalf("status %q (%s), want partial: no answer", b.Res.Status, b.Res.Error)
	}
	ctd := runtimeSummary(t, b)["containerd"]
	v := criItem(t, ctd, "Version")
	if !v.TimedOut || v.DurationSeconds < timeout.Seconds()*0.9 || v.DurationSeconds > timeout.Seconds()+1 {
		t.Errorf("Version: %+v, want timed out after %s", v, timeout)
	}
	for _, m := range []string{"Status", "ListPodSandbox", "ListContainers", "ListImages", "ContainerStatus"} {
		if it := criItem(t, ctd, m); !strings.HasPrefix(it.Skipped, "not attempted") || it.DurationSeconds != 0 {
			t.Errorf("%s after a hung Version: %+v", m, it)
		}
	}
	// One deadline: the collector's own start, its workers and the
	// bundle's writing come on top (2s under the race detector on a busy
	// machine), well under a second deadline; seven calls one after the
	// other would take seven.
	if b.Res.DurationSeconds > 2*timeout.Seconds() {
		t.Errorf("collector took %.2fs (whole run %s), more than one %s deadline and overhead", b.Res.DurationSeconds, took, timeout)
	}
	if ctd.Listed {
		t.Errorf("listed: %+v", ctd)
	}
}

// A socket file nobody listens on (the runtime died): refused at once,
// partial with the reason.
func TestRuntimeCRIRefused(t *testing.T) {
	dir, err := os.MkdirTemp("", "nscri-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "c.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()
	if _, err := os.Stat(sock); err != nil {
		t.Fatalf("the socket file should stay: %v", err)
	}
	t.Setenv("PATH", t.TempDir())
	supervisortest.Flags(t, "runtime", "--containerd-config", filepath.Join(dir, "none.toml"), "--containerd-socket", sock,
		"--containerd-debug-socket", filepath.Join(dir, "none.sock"),
		"--crio-socket", filepath.Join(dir, "none"), "--docker-socket", filepath.Join(dir, "none"))
	b := supervisortest.Collect(t, "runtime", collectors.Common{})
	if b.Res.Status != bundle.StatusPartial || !strings.Contains(b.Res.Error, "connection refused") {
		t.Fatalf("status %q (%s), want partial: refused", b.Res.Status, b.Res.Error)
	}
	if v := criItem(t, runtimeSummary(t, b)["containerd"], "Version"); v.TimedOut || v.DurationSeconds > 5 {
		t.Errorf("a refused connection waited: %+v", v)
	}
}

// fakeCRIO is a CRI runtime service that answers like CRI-O for some
// calls, not at all for one container's status, and does not serve the
// image service.
type fakeCRIO struct {
	criapi.UnimplementedRuntimeServiceServer
	hang chan struct{}
}

func (f *fakeCRIO) Version(context.Context, *criapi.VersionRequest) (*criapi.VersionResponse, error) {
	return &criapi.VersionResponse{Version: "0.1.0", RuntimeName: "cri-o", RuntimeVersion: "1.30.0", RuntimeApiVersion: "v1"}, nil
}

func (f *fakeCRIO) Status(context.Context, *criapi.StatusRequest) (*criapi.StatusResponse, error) {
	return &criapi.StatusResponse{Status: &criapi.RuntimeStatus{Conditions: []*criapi.RuntimeCondition{{Type: "RuntimeReady", Status: true}}},
		Info: map[string]string{"config": "[crio.image]\nglobal_auth_file = \"\"\n[crio.runtime]\ndefault_runtime = \"runc\"\n"}}, nil
}

func (f *fakeCRIO) ListPodSandbox(context.Context, *criapi.ListPodSandboxRequest) (*criapi.ListPodSandboxResponse, error) {
	return &criapi.ListPodSandboxResponse{Items: []*criapi.PodSandbox{{Id: "sb1", Metadata: &criapi.PodSandboxMetadata{Name: "csi-node", Uid: "u-1", Namespace: "kube-system"}}}}, nil
}

func (f *fakeCRIO) ListContainers(context.Context, *criapi.ListContainersRequest) (*criapi.ListContainersResponse, error) {
	return &criapi.ListContainersResponse{Containers: []*criapi.Container{
		{Id: "c-ok", PodSandboxId: "sb1"}, {Id: "c-gone", PodSandboxId: "sb1"}, {Id: "c-hang", PodSandboxId: "sb1"},
	}}, nil
}

func (f *fakeCRIO) ContainerStatus(ctx context.Context, r *criapi.ContainerStatusRequest) (*criapi.ContainerStatusResponse, error) {
	switch r.ContainerId {
	case "c-ok":
		return &criapi.ContainerStatusResponse{Status: &criapi.ContainerStatus{Id: "c-ok", State: criapi.ContainerState_CONTAINER_EXITED, ExitCode: 137, Reason: "OOMKilled",
			Mounts: []*criapi.Mount{{ContainerPath: "/csi", HostPath: "/var/lib/kubelet/plugins/x.csi.example"}}}}, nil
	case "c-hang":
		select {
		case <-ctx.Done():
		case <-f.hang:
		}
		return nil, ctx.Err()
	}
	return nil, grpcstatus.Error(codes.NotFound, "container not found")
}

// CRI-O's socket at its default place under --root, answered by a fake
// CRI server: calls the runtime does not implement are skipped, not
// failed; a container removed between the list and its status is no
// failure; one status that never comes costs one deadline and makes the
// run partial, the rest kept.
func TestRuntimeCRIFake(t *testing.T) {
	dir, err := os.MkdirTemp("", "nscri-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.MkdirAll(filepath.Join(dir, "run", "crio"), 0o755); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "run", "crio", "crio.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	fake := &fakeCRIO{hang: make(chan struct{})}
	criapi.RegisterRuntimeServiceServer(srv, fake)
	go srv.Serve(l)
	t.Cleanup(func() { close(fake.hang); srv.Stop() })

	t.Setenv("PATH", t.TempDir())
	supervisortest.Flags(t, "runtime", "--runtime-request-timeout", "1s")
	b := supervisortest.Collect(t, "runtime", collectors.Common{Root: dir})
	if b.Res.Status != bundle.StatusPartial || !strings.Contains(b.Res.Error, "cri-o's CRI container statuses failed") {
		t.Fatalf("status %q (%s), want partial for the one status", b.Res.Status, b.Res.Error)
	}
	crio := runtimeSummary(t, b)["cri-o"]
	if !crio.Listed || crio.CRIRuntimeName != "cri-o" || crio.CRIRuntimeVersion != "1.30.0" || crio.Socket != "/run/crio/crio.sock" ||
		criItem(t, crio, "Version").URL != "unix:///run/crio/crio.sock" {
		t.Errorf("cri-o summary %+v", crio)
	}
	for _, m := range []string{"ListImages", "ImageFsInfo", "ListContainerStats"} {
		if it := criItem(t, crio, m); it.Error != "" || !strings.Contains(it.Skipped, "does not implement") {
			t.Errorf("%s: %+v, want skipped as not implemented", m, it)
		}
	}
	st := criItem(t, crio, "ContainerStatus")
	if !st.TimedOut || !strings.Contains(st.Error, "1 of 3 container statuses failed; first: c-hang: no answer within 1s") || st.DurationSeconds > 3 {
		t.Errorf("ContainerStatus: %+v", st)
	}
	var sts struct {
		Statuses []struct {
			Id, State, Reason string
			ExitCode          int
			Mounts            []struct{ HostPath string }
		}
	}
	if err := json.Unmarshal(b.File(t, "runtime/crio/cri-container-status.json"), &sts); err != nil || len(sts.Statuses) != 1 {
		t.Fatalf("cri-container-status.json (%v): %s", err, b.File(t, "runtime/crio/cri-container-status.json"))
	}
	if s := sts.Statuses[0]; s.Id != "c-ok" || s.State != "CONTAINER_EXITED" || s.Reason != "OOMKilled" || s.ExitCode != 137 || s.Mounts[0].HostPath != "/var/lib/kubelet/plugins/x.csi.example" {
		t.Errorf("status %+v", s)
	}
	// A configuration that is not JSON (CRI-O's is TOML) is kept as text.
	var status struct{ Info map[string]string }
	if err := json.Unmarshal(b.File(t, "runtime/crio/cri-status.json"), &status); err != nil || !strings.Contains(status.Info["config"], `default_runtime = "runc"`) {
		t.Errorf("cri-status.json (%v): %s", err, b.File(t, "runtime/crio/cri-status.json"))
	}
	b.File(t, "runtime/crio/cri-pods.json")
	b.File(t, "runtime/crio/cri-version.json")
}
