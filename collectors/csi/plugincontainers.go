package csi

// --- CSI node plugins found by what they mount --------------------------
//
// A CSI node plugin is a container that reaches the kubelet through its
// plugin directories: node-driver-registrar mounts plugins_registry (at
// /registration by convention) to announce the driver, the driver mounts
// its socket directory under plugins/ (or plugins/ whole, for the staging
// paths). Whatever the pod and its containers are called, that is what
// makes them a driver. The runtime keeps each running container's OCI
// config (config.json: its mounts, and the pod it belongs to in its
// annotations) under its state directory; one worker item reads them all
// and returns only which pods mount what.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"regexp"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/collectors/hostfs"
	"github.com/nodesnap/nodesnap/engine/isolate"
	"github.com/nodesnap/nodesnap/internal/inroot"
)

const opPluginContainers = "csi.plugincontainers"

func init() {
	isolate.RegisterOp(opPluginContainers, isolate.Typed(pluginContainersOp))
}

// DefaultCSIBundleDirs are where container runtimes keep their running
// containers' OCI bundles (each entry a directory with config.json, or
// userdata/config.json): containerd's Kubernetes namespace, k3s's
// containerd, CRI-O.
var DefaultCSIBundleDirs = []string{
	"/run/containerd/io.containerd.runtime.v2.task/k8s.io",
	"/run/k3s/containerd/io.containerd.runtime.v2.task/k8s.io",
	"/run/containers/storage/overlay-containers",
}

// PluginContainer is a container whose mounts make it a CSI node plugin.
type PluginContainer struct {
	PodUID    string `json:"pod_uid"`
	Pod       string `json:"pod,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Container string `json:"container,omitempty"`
	// Reason says which mount makes it one.
	Reason string `json:"reason"`
	// Env is the container's environment ("NAME=value"), never written:
	// its secret values are recorded for the run's last pass
	// (collectors.Env.RecordEnvironment), so a driver logging one bare
	// does not leak it.
	Env []string `json:"env,omitempty"`
}

// ociConfig is what is read of an OCI runtime config.
type ociConfig struct {
	Mounts []struct {
		Destination string `json:"destination"`
		Source      string `json:"source"`
	} `json:"mounts"`
	Annotations map[string]string `json:"annotations"`
	Linux       *struct {
		CgroupsPath string `json:"cgroupsPath"`
	} `json:"linux"`
	Process *struct {
		Env []string `json:"env"`
	} `json:"process"`
}

// The pod of a container, in the annotations containerd (io.kubernetes.cri.*)
// and CRI-O (io.kubernetes.*) put in its config.
var (
	annPodUID    = []string{"io.kubernetes.cri.sandbox-uid", "io.kubernetes.pod.uid"}
	annPod       = []string{"io.kubernetes.cri.sandbox-name", "io.kubernetes.pod.name"}
	annNamespace = []string{"io.kubernetes.cri.sandbox-namespace", "io.kubernetes.pod.namespace"}
	annContainer = []string{"io.kubernetes.cri.container-name", "io.kubernetes.container.name"}
	annType      = []string{"io.kubernetes.cri.container-type", "io.kubernetes.cri-o.ContainerType"}
	// A pod UID in a cgroup path: kubepods/burstable/pod<uid>/… (cgroupfs)
	// or kubepods-burstable-pod<uid with _>.slice (systemd), for a runtime
	// whose config has no pod annotations (dockerd behind cri-dockerd).
	cgroupPodUID = regexp.MustCompile(`pod([0-9a-fA-F]{8}[-_][0-9a-fA-F]{4}[-_][0-9a-fA-F]{4}[-_][0-9a-fA-F]{4}[-_][0-9a-fA-F]{12})`)
)

func annotation(a map[string]string, keys []string) string {
	for _, k := range keys {
		if v := a[k]; v != "" {
			return v
		}
	}
	return ""
}

// ParsePluginContainer reads a container's OCI config and says whether its
// mounts make it a CSI node plugin: a mount of the kubelet's plugin
// registration directory (plugins_registry, or anything mounted at
// /registration), of a directory or socket under the kubelet's plugins
// directory (kubeletDir/plugins), or of a csi.sock anywhere. ok is false
// for any other container, a pod sandbox, or a container whose pod is
// unknown; err only for a config that is not JSON. It never panics.
func ParsePluginContainer(data []byte, kubeletDir string) (pc PluginContainer, ok bool, err error) {
	var cfg ociConfig
	if err := json.Unmarshal(data, &cfg); err != nil {
		return pc, false, fmt.Errorf("not an OCI config: %w", err)
	}
	if annotation(cfg.Annotations, annType) == "sandbox" {
		return pc, false, nil
	}
	plugins := path.Clean(kubeletDir) + "/plugins"
	reason := ""
	for _, m := range cfg.Mounts {
		src, dst := path.Clean(m.Source), path.Clean(m.Destination)
		if m.Source == "" || m.Destination == "" {
			continue
		}
		var r string
		switch {
		case path.Base(src) == "plugins_registry" || strings.Contains(src, "/plugins_registry/") || dst == "/registration":
			r = fmt.Sprintf("mounts the kubelet's plugin registration directory (%s at %s)", src, dst)
		case src == plugins || strings.HasPrefix(src, plugins+"/"):
			r = fmt.Sprintf("mounts the kubelet's plugins directory (%s at %s)", src, dst)
		case path.Base(src) == "csi.sock" || path.Base(dst) == "csi.sock":
			r = fmt.Sprintf("mounts a CSI socket (%s at %s)", src, dst)
		default:
			continue
		}
		// Registration names a node plugin best: keep the first such mount.
		if reason == "" || strings.Contains(r, "registration") && !strings.Contains(reason, "registration") {
			reason = r
		}
	}
	if reason == "" {
		return pc, false, nil
	}
	pc = PluginContainer{
		PodUID: annotation(cfg.Annotations, annPodUID), Pod: annotation(cfg.Annotations, annPod),
		Namespace: annotation(cfg.Annotations, annNamespace), Container: annotation(cfg.Annotations, annContainer),
		Reason: reason,
	}
	if cfg.Process != nil {
		pc.Env = cfg.Process.Env
	}
	if pc.PodUID == "" && cfg.Linux != nil {
		if m := cgroupPodUID.FindStringSubmatch(cfg.Linux.CgroupsPath); m != nil {
			pc.PodUID = strings.ToLower(strings.ReplaceAll(m[1], "_", "-"))
		}
	}
	if pc.PodUID == "" {
		return PluginContainer{}, false, nil
	}
	return pc, true, nil
}

type pluginContainersRequest struct {
	Dirs       []string `json:"dirs"`
	KubeletDir string   `json:"kubelet_dir"`
	Max        int      `json:"max"`
}

type pluginContainersResult struct {
	Containers []PluginContainer `json:"containers"`
	// Read counts the configs read; Errors says what could not be.
	Read   int      `json:"read"`
	Errors []string `json:"errors,omitempty"`
}

// maxOCIConfig bounds one config.json: a container's spec is a few tens of
// KiB (its environment included).
const maxOCIConfig = 4 << 20

// pluginContainersOp lists each bundle directory and reads the config of
// every container in it. Directories that do not exist are no error (the
// node runs another runtime).
func pluginContainersOp(rq pluginContainersRequest) (any, error) {
	res := pluginContainersResult{Containers: []PluginContainer{}}
	for _, dir := range rq.Dirs {
		// Resolved inside the boundary: a runtime directory that is a
		// link (or under one) leads nowhere outside --root.
		fd, err := inroot.Process().Open(dir, unix.O_RDONLY|unix.O_DIRECTORY)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOENT) {
			continue
		}
		if err != nil {
			res.Errors = append(res.Errors, fmt.Sprintf("listing %s: %v", dir, err))
			continue
		}
		f := os.NewFile(uintptr(fd), dir)
		names, err := f.Readdirnames(rq.Max)
		_ = f.Close() // read-only: nothing to lose
		if err != nil && !errors.Is(err, io.EOF) {
			res.Errors = append(res.Errors, fmt.Sprintf("listing %s: %v", dir, err))
		}
		sort.Strings(names)
		for _, n := range names {
			// A container's directory is a directory: a symbolic link
			// there is not followed (it could lead out of the root).
			if mode, err := lstatIn(path.Join(dir, n)); err != nil || mode != unix.S_IFDIR {
				continue
			}
			if mode, err := lstatIn(path.Join(dir, n, "userdata")); err == nil && mode != unix.S_IFDIR {
				continue
			}
			for _, rel := range []string{"config.json", "userdata/config.json"} {
				data, err := readNoFollow(path.Join(dir, n, rel), maxOCIConfig)
				if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOTDIR) {
					continue
				}
				if err != nil {
					res.Errors = append(res.Errors, fmt.Sprintf("reading %s: %v", path.Join(dir, n, rel), err))
					break
				}
				res.Read++
				if pc, ok, err := ParsePluginContainer(data, rq.KubeletDir); err != nil {
					res.Errors = append(res.Errors, fmt.Sprintf("%s: %v", path.Join(dir, n, rel), err))
				} else if ok {
					res.Containers = append(res.Containers, pc)
				}
				break
			}
		}
	}
	return res, nil
}

// readNoFollow reads at most max bytes of a regular file that is not a
// symbolic link (a runtime's state directory holds none; one planted there
// is not followed out of the root).
func readNoFollow(p string, max int64) ([]byte, error) {
	fd, err := inroot.Process().Open(p, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: p, Err: err}
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close() //nolint:errcheck // read-only
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", p)
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%s: larger than %d bytes", p, max)
	}
	return data, nil
}

// lstatIn is the type of what p names (not followed if a link), p
// resolved inside the boundary.
func lstatIn(p string) (uint32, error) {
	fd, err := inroot.Process().Open(p, unix.O_PATH|unix.O_NOFOLLOW)
	if err != nil {
		return 0, err
	}
	defer func() { _ = unix.Close(fd) }() // an O_PATH descriptor: nothing to lose
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, err
	}
	return st.Mode & unix.S_IFMT, nil
}

// pluginPods finds the CSI node plugin containers by their mounts and
// returns, per pod UID, why its pod is a CSI pod.
func (c *csiRun) pluginPods(ctx context.Context) map[string]string {
	out := map[string]string{}
	var seen []string
	var first hostfs.Path
	for _, d := range c.opts.BundleDirs {
		if !path.IsAbs(d) {
			c.inv.Errors = append(c.inv.Errors, fmt.Sprintf("OCI bundle directory %q: not an absolute path; not read", d))
			continue
		}
		if first == "" {
			first = hostfs.Path(d)
		}
		seen = append(seen, c.env.Host().Seen(hostfs.Path(d)))
	}
	if len(seen) == 0 {
		return out
	}
	var res pluginContainersResult
	if err := c.env.Host().Do(ctx, 20*time.Second, opPluginContainers, first,
		pluginContainersRequest{Dirs: seen, KubeletDir: c.opts.KubeletDir, Max: c.opts.MaxEntries}, &res); err != nil {
		c.inv.Errors = append(c.inv.Errors, fmt.Sprintf("reading the containers' OCI configs (to find CSI node plugins by their mounts): %v", err))
		return out
	}
	c.inv.Errors = append(c.inv.Errors, res.Errors...)
	for _, pc := range res.Containers {
		c.env.RecordEnvironment(pc.Env)
		r := "a container " + pc.Reason
		if pc.Container != "" {
			r = fmt.Sprintf("container %q %s", pc.Container, pc.Reason)
		}
		if old, ok := out[pc.PodUID]; !ok || strings.Contains(r, "registration") && !strings.Contains(old, "registration") {
			out[pc.PodUID] = r
		}
	}
	return out
}
