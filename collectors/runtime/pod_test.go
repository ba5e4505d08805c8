package runtime_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	criapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodesnap/nodesnap/test/testkit"
)

// testImage is the sandbox and container image of the CRI tests: one layer
// holding a static program that sleeps, built here (no registry is
// reachable), imported with ctr.
const testImage = "nodesnap.invalid/sleeper:1"

// importSleeperImage builds the image as an OCI archive and imports it
// into containerd's k8s.io namespace.
func importSleeperImage(t *testing.T, c *testContainerd) {
	t.Helper()
	testkit.RequireTool(t, "go")
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte("package main\n\nimport \"time\"\n\nfunc main() {\n\tfor {\n\t\ttime.Sleep(time.Hour)\n\t}\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "sleeper")
	build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, src)
	build.Dir = dir
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=", "GO111MODULE=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the sleeper: %v\n%s", err, out)
	}
	prog, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}

	// The layer: /sleeper.
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	if err := tw.WriteHeader(&tar.Header{Name: "sleeper", Mode: 0o755, Size: int64(len(prog)), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}); err != nil {
		t.Fatal(err)
	}
	tw.Write(prog)
	tw.Close()
	digest := func(b []byte) string { s := sha256.Sum256(b); return "sha256:" + hex.EncodeToString(s[:]) }
	layerDigest := digest(layer.Bytes())
	config, _ := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH, "os": "linux",
		"config": map[string]any{"Entrypoint": []string{"/sleeper"}},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{layerDigest}},
	})
	manifest, _ := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
		"config": map[string]any{"mediaType": "application/vnd.oci.image.config.v1+json", "digest": digest(config), "size": len(config)},
		"layers": []any{map[string]any{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": layerDigest, "size": layer.Len()}},
	})
	index, _ := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
		"manifests": []any{map[string]any{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": digest(manifest), "size": len(manifest),
			"annotations": map[string]string{"io.containerd.image.name": testImage, "org.opencontainers.image.ref.name": "1"}}},
	})
	archive := filepath.Join(dir, "image.tar")
	f, err := os.Create(archive)
	if err != nil {
		t.Fatal(err)
	}
	aw := tar.NewWriter(f)
	for _, e := range []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", index},
		{"blobs/sha256/" + strings.TrimPrefix(digest(config), "sha256:"), config},
		{"blobs/sha256/" + strings.TrimPrefix(digest(manifest), "sha256:"), manifest},
		{"blobs/sha256/" + strings.TrimPrefix(layerDigest, "sha256:"), layer.Bytes()},
	} {
		if err := aw.WriteHeader(&tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.data)), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}); err != nil {
			t.Fatal(err)
		}
		aw.Write(e.data)
	}
	if err := aw.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	c.ctr(t, "-n", "k8s.io", "images", "import", "--snapshotter", "native", archive)
}

// testPod is a pod sandbox with one container, run through containerd's
// CRI plugin on the host's network (no CNI here).
type testPod struct {
	UID, Namespace, Name, SandboxID, ContainerID string
}

// runTestPod starts a pod and its container, and removes both (and so
// their shims and processes) when the test ends, before containerd stops.
func runTestPod(t *testing.T, c *testContainerd) testPod {
	t.Helper()
	testkit.RequireTool(t, "runc")
	conn, err := grpc.NewClient("unix://"+c.sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	rs := criapi.NewRuntimeServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p := testPod{UID: "5e6f7a8b-0000-4c1d-9e2f-nodesnaptest", Namespace: "storage", Name: "volume-writer"}
	sbCfg := &criapi.PodSandboxConfig{
		Metadata:     &criapi.PodSandboxMetadata{Name: p.Name, Uid: p.UID, Namespace: p.Namespace},
		LogDirectory: filepath.Join(c.dir, "logs"),
		Labels:       map[string]string{"io.kubernetes.pod.uid": p.UID, "app": "writer"},
		Linux: &criapi.LinuxPodSandboxConfig{SecurityContext: &criapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &criapi.NamespaceOption{Network: criapi.NamespaceMode_NODE}}},
	}
	sb, err := rs.RunPodSandbox(ctx, &criapi.RunPodSandboxRequest{Config: sbCfg})
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(c.dir, "containerd.log"))
		cannotStart(t, "RunPodSandbox: %v\n%s", err, tail(log, 3000))
	}
	p.SandboxID = sb.PodSandboxId
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := rs.StopPodSandbox(ctx, &criapi.StopPodSandboxRequest{PodSandboxId: p.SandboxID}); err != nil {
			t.Errorf("StopPodSandbox: %v", err)
		}
		if _, err := rs.RemovePodSandbox(ctx, &criapi.RemovePodSandboxRequest{PodSandboxId: p.SandboxID}); err != nil {
			t.Errorf("RemovePodSandbox: %v", err)
		}
	})
	ct, err := rs.CreateContainer(ctx, &criapi.CreateContainerRequest{PodSandboxId: p.SandboxID, SandboxConfig: sbCfg,
		Config: &criapi.ContainerConfig{
			Metadata: &criapi.ContainerMetadata{Name: "writer"},
			Image:    &criapi.ImageSpec{Image: testImage},
			Mounts:   []*criapi.Mount{{ContainerPath: "/data", HostPath: c.dir, Readonly: true}},
		}})
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	p.ContainerID = ct.ContainerId
	if _, err := rs.StartContainer(ctx, &criapi.StartContainerRequest{ContainerId: p.ContainerID}); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}
	return p
}
