// Command csidriver is the e2e cluster's CSI driver: a node-only hostpath
// driver that speaks real CSI gRPC to the real kubelet, registered through
// the kubelet's plugin watcher exactly as node-driver-registrar does.
//
// The kubernetes-csi hostpath driver and node-driver-registrar are not
// published as Go modules the proxy serves; the CSI spec and the kubelet's
// plugin-registration API are, so this is both halves in one small binary.
// Volumes are statically provisioned (a PersistentVolume naming a volume
// handle): NodeStageVolume bind-mounts <data-dir>/<handle> at the staging
// path (the ".../globalmount" the incidents revolve around) and
// NodePublishVolume bind-mounts that at the pod's target path.
//
// With --state-file it keeps its volumes' staged and published paths in a
// JSON file laid out as csi-driver-host-path's state.json, loaded at start
// and written on every change, and, as that driver does, answers an
// unpublish of a target its state does not list as published with success
// and without unmounting: what incident 004's restarted driver did after
// its state lost the publish (csi-driver-host-path#457).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

type driver struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedNodeServer
	name, nodeID, dataDir string
	mu                    sync.Mutex
	// stateFile, when set, is where state is kept (csi-driver-host-path's
	// state.json layout); nil state means the driver keeps none.
	stateFile string
	state     *hostpathState
}

// hostpathState is csi-driver-host-path's state.json: its Go field names
// are the keys; a volume lists where it is staged and published.
type hostpathState struct {
	Volumes   []*stateVolume
	Snapshots []json.RawMessage
}

type stateVolume struct {
	VolID     string
	VolName   string
	VolPath   string
	NodeID    string
	Kind      string
	Staged    []string
	Published []string
}

func main() {
	var (
		name      = flag.String("driver-name", "hostpath.csi.k8s.io", "CSI driver name")
		nodeID    = flag.String("node-id", "", "node id (default: the host name)")
		endpoint  = flag.String("endpoint", "/var/lib/kubelet/plugins/hostpath.csi.k8s.io/csi.sock", "CSI socket path")
		regDir    = flag.String("registration-dir", "/var/lib/kubelet/plugins_registry", "kubelet plugin watcher directory")
		dataDir   = flag.String("data-dir", "/var/lib/csi-hostpath-data", "where volumes' data lives")
		kubeletEP = flag.String("kubelet-endpoint", "", "the CSI socket path as the kubelet sees it (default: --endpoint)")
		logFile   = flag.String("log-file", "", "append stdout and stderr to this file, as a driver run as a host process with its output redirected does (default: stderr)")
		stateFile = flag.String("state-file", "", "keep the volumes' staged and published paths in this file, laid out as csi-driver-host-path's state.json, and unpublish only what it lists (default: no state; unpublish what is mounted)")
	)
	flag.Parse()
	log.SetFlags(log.Ldate | log.Ltime | log.Lmicroseconds | log.Lshortfile)
	if *logFile != "" {
		// Descriptors 1 and 2 become the file itself, not a pipe to a
		// writer: what nodesnap finds behind a host driver's fd 1/2.
		f, err := os.OpenFile(*logFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			log.Fatalf("log file: %v", err)
		}
		for _, fd := range []int{1, 2} {
			if err := unix.Dup2(int(f.Fd()), fd); err != nil {
				log.Fatalf("log file: %v", err)
			}
		}
		_ = f.Close()
	}
	if *nodeID == "" {
		h, err := os.Hostname()
		if err != nil {
			log.Fatalf("node id: %v", err)
		}
		*nodeID = h
	}
	if *kubeletEP == "" {
		*kubeletEP = *endpoint
	}
	d := &driver{name: *name, nodeID: *nodeID, dataDir: *dataDir, stateFile: *stateFile}
	if err := os.MkdirAll(*dataDir, 0o755); err != nil {
		log.Fatal(err)
	}
	if err := d.loadState(); err != nil {
		log.Fatal(err)
	}

	csiSrv, err := serve(*endpoint, func(s *grpc.Server) {
		csi.RegisterIdentityServer(s, d)
		csi.RegisterNodeServer(s, d)
	})
	if err != nil {
		log.Fatal(err)
	}
	regSock := filepath.Join(*regDir, *name+"-reg.sock")
	regSrv, err := serve(regSock, func(s *grpc.Server) {
		registerapi.RegisterRegistrationServer(s, &registrar{name: *name, endpoint: *kubeletEP})
	})
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("driver %s for node %s: CSI on %s, registration on %s", *name, *nodeID, *endpoint, regSock)

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	regSrv.Stop()
	csiSrv.Stop()
	_ = os.Remove(regSock)
	_ = os.Remove(*endpoint)
}

func serve(sock string, register func(*grpc.Server)) (*grpc.Server, error) {
	if err := os.MkdirAll(filepath.Dir(sock), 0o755); err != nil {
		return nil, err
	}
	_ = os.Remove(sock)
	l, err := net.Listen("unix", sock)
	if err != nil {
		return nil, err
	}
	s := grpc.NewServer(grpc.UnaryInterceptor(logCalls))
	register(s)
	go func() {
		if err := s.Serve(l); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			log.Printf("serving %s: %v", sock, err)
		}
	}()
	return s, nil
}

// logCalls logs every call as the kubernetes-csi sidecars do at -v=5, so
// the driver pod's log carries the evidence nodesnap collects.
func logCalls(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	log.Printf("GRPC call: %s", info.FullMethod)
	log.Printf("GRPC request: %+v", req)
	resp, err := h(ctx, req)
	if err != nil {
		log.Printf("GRPC error: %v", err)
	} else {
		log.Printf("GRPC response: %+v", resp)
	}
	return resp, err
}

type registrar struct {
	registerapi.UnimplementedRegistrationServer
	name, endpoint string
}

func (r *registrar) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: r.name, Endpoint: r.endpoint, SupportedVersions: []string{"1.0.0"}}, nil
}

func (r *registrar) NotifyRegistrationStatus(_ context.Context, st *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	if !st.PluginRegistered {
		log.Printf("registration failed: %s", st.Error)
	} else {
		log.Printf("registered with the kubelet")
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}

func (d *driver) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: d.name, VendorVersion: "e2e"}, nil
}

func (d *driver) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{}, nil
}

func (d *driver) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{}, nil
}

func (d *driver) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: d.nodeID}, nil
}

func (d *driver) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{Capabilities: []*csi.NodeServiceCapability{{
		Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{Type: csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME}},
	}}}, nil
}

func (d *driver) NodeStageVolume(_ context.Context, req *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	id, staging := req.GetVolumeId(), req.GetStagingTargetPath()
	if id == "" || staging == "" || filepath.Base(id) != id {
		return nil, status.Error(codes.InvalidArgument, "volume id and staging path are required")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	// A volume with an image file <id>.img is block-backed: a loop device
	// with an ext4 filesystem, as rbd or iSCSI volumes are on real nodes
	// (incident 002). Otherwise a directory, bind-mounted.
	if img := filepath.Join(d.dataDir, id+".img"); fileExists(img) {
		// As ceph-csi refuses to map an rbd image that still has a
		// watcher ("rbd image ... is still being used"), an image still
		// attached to a loop device is in use by someone else: its last
		// unstage left it mounted somewhere (incident 002).
		if !isMountpoint(staging) {
			if dev := loopOf(img); dev != "" {
				return nil, status.Errorf(codes.FailedPrecondition, "image %s is still being used: attached to %s", img, dev)
			}
		}
		if err := stageLoop(img, staging); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		d.record(id, img, func(v *stateVolume) { v.Staged = addPath(v.Staged, staging) })
		return &csi.NodeStageVolumeResponse{}, nil
	}
	src := filepath.Join(d.dataDir, id)
	if err := os.MkdirAll(src, 0o777); err != nil {
		return nil, status.Errorf(codes.Internal, "creating %s: %v", src, err)
	}
	if err := bindMount(src, staging, false); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	d.record(id, src, func(v *stateVolume) { v.Staged = addPath(v.Staged, staging) })
	return &csi.NodeStageVolumeResponse{}, nil
}

func (d *driver) NodeUnstageVolume(_ context.Context, req *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := unmount(req.GetStagingTargetPath()); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	d.record(req.GetVolumeId(), "", func(v *stateVolume) { v.Staged = removePath(v.Staged, req.GetStagingTargetPath()) })
	return &csi.NodeUnstageVolumeResponse{}, nil
}

func (d *driver) NodePublishVolume(_ context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	staging, target := req.GetStagingTargetPath(), req.GetTargetPath()
	if staging == "" || target == "" {
		return nil, status.Error(codes.InvalidArgument, "staging and target paths are required")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := bindMount(staging, target, req.GetReadonly()); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	d.record(req.GetVolumeId(), "", func(v *stateVolume) { v.Published = addPath(v.Published, target) })
	return &csi.NodePublishVolumeResponse{}, nil
}

func (d *driver) NodeUnpublishVolume(_ context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	target := req.GetTargetPath()
	if d.state != nil && !d.published(req.GetVolumeId(), target) {
		// csi-driver-host-path trusts its state: a target it does not
		// list is not its business, mounted or not (incident 004).
		log.Printf("Volume %q is not published at %q, nothing to do.", req.GetVolumeId(), target)
		return &csi.NodeUnpublishVolumeResponse{}, nil
	}
	if !isMountpoint(target) {
		// csi-driver-host-path's words for a target it does not know as
		// published (incident 004).
		log.Printf("Volume %q is not published at %q, nothing to do.", req.GetVolumeId(), target)
	}
	if err := unmount(target); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	_ = os.Remove(target)
	d.record(req.GetVolumeId(), "", func(v *stateVolume) { v.Published = removePath(v.Published, target) })
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// loadState reads the state file, when the driver keeps one.
func (d *driver) loadState() error {
	if d.stateFile == "" {
		return nil
	}
	d.state = &hostpathState{}
	b, err := os.ReadFile(d.stateFile)
	if errors.Is(err, os.ErrNotExist) {
		return d.saveState()
	}
	if err != nil {
		return fmt.Errorf("reading the state file: %w", err)
	}
	if err := json.Unmarshal(b, d.state); err != nil {
		return fmt.Errorf("the state file %s: %w", d.stateFile, err)
	}
	return nil
}

func (d *driver) saveState() error {
	b, err := json.MarshalIndent(d.state, "", "  ")
	if err != nil {
		return err
	}
	tmp := d.stateFile + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("writing the state file: %w", err)
	}
	return os.Rename(tmp, d.stateFile)
}

// record changes a volume's state (made when first seen) and saves it;
// the caller holds d.mu.
func (d *driver) record(id, volPath string, change func(*stateVolume)) {
	if d.state == nil || id == "" {
		return
	}
	var v *stateVolume
	for _, sv := range d.state.Volumes {
		if sv.VolID == id {
			v = sv
		}
	}
	if v == nil {
		v = &stateVolume{VolID: id, VolName: id, NodeID: d.nodeID, Kind: "filesystem"}
		d.state.Volumes = append(d.state.Volumes, v)
	}
	if volPath != "" {
		v.VolPath = volPath
	}
	change(v)
	if err := d.saveState(); err != nil {
		log.Printf("saving the state: %v", err)
	}
}

func (d *driver) published(id, target string) bool {
	for _, v := range d.state.Volumes {
		if v.VolID == id {
			for _, p := range v.Published {
				if filepath.Clean(p) == filepath.Clean(target) {
					return true
				}
			}
		}
	}
	return false
}

func addPath(list []string, p string) []string {
	for _, q := range list {
		if q == p {
			return list
		}
	}
	return append(list, p)
}

func removePath(list []string, p string) []string {
	out := list[:0]
	for _, q := range list {
		if filepath.Clean(q) != filepath.Clean(p) {
			out = append(out, q)
		}
	}
	return out
}

// loopOf is the loop device backed by img, or "".
func loopOf(img string) string {
	files, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil && strings.TrimSpace(string(b)) == img {
			return "/dev/" + filepath.Base(filepath.Dir(filepath.Dir(f)))
		}
	}
	return ""
}

func isMountpoint(p string) bool {
	var st, parent unix.Stat_t
	if unix.Stat(p, &st) != nil || unix.Stat(filepath.Dir(p), &parent) != nil {
		return false
	}
	if st.Dev != parent.Dev {
		return true
	}
	// A bind mount of a directory of the same filesystem keeps st_dev:
	// ask the mount table.
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	return containsMountpoint(string(data), p)
}

func containsMountpoint(mountinfo, p string) bool {
	for _, line := range splitLines(mountinfo) {
		var f [5]string
		n, _ := fmt.Sscan(line, &f[0], &f[1], &f[2], &f[3], &f[4])
		if n == 5 && f[4] == p {
			return true
		}
	}
	return false
}

func splitLines(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

func bindMount(src, target string, ro bool) error {
	if err := os.MkdirAll(target, 0o750); err != nil {
		return fmt.Errorf("creating %s: %w", target, err)
	}
	if isMountpoint(target) {
		return nil
	}
	if err := unix.Mount(src, target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind-mounting %s at %s: %w", src, target, err)
	}
	if ro {
		if err := unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			return fmt.Errorf("making %s read-only: %w", target, err)
		}
	}
	return nil
}

func unmount(target string) error {
	if target == "" || !isMountpoint(target) {
		return nil
	}
	if err := unix.Unmount(target, 0); err != nil {
		return fmt.Errorf("unmounting %s: %w", target, err)
	}
	return nil
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// stageLoop attaches img to a free loop device (autoclear: the kernel
// detaches it when its last mount goes) and mounts its ext4 at staging,
// as block-backed drivers (rbd, iSCSI) do.
func stageLoop(img, staging string) error {
	if err := os.MkdirAll(staging, 0o750); err != nil {
		return fmt.Errorf("creating %s: %w", staging, err)
	}
	if isMountpoint(staging) {
		return nil
	}
	return attachAndMount(img, staging)
}

func attachAndMount(img, target string) error {
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("opening /dev/loop-control: %w", err)
	}
	defer ctl.Close()
	n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
	if err != nil {
		return fmt.Errorf("finding a free loop device: %w", err)
	}
	dev := fmt.Sprintf("/dev/loop%d", n)
	// A container's /dev is populated when it starts: a loop device the
	// kernel made later needs its node.
	if !fileExistsAny(dev) {
		if err := unix.Mknod(dev, unix.S_IFBLK|0o660, int(unix.Mkdev(7, uint32(n)))); err != nil {
			return fmt.Errorf("creating %s: %w", dev, err)
		}
	}
	lf, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("opening %s: %w", dev, err)
	}
	defer lf.Close()
	f, err := os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("opening %s: %w", img, err)
	}
	defer f.Close()
	if err := unix.IoctlSetInt(int(lf.Fd()), unix.LOOP_SET_FD, int(f.Fd())); err != nil {
		return fmt.Errorf("attaching %s to %s: %w", img, dev, err)
	}
	info := unix.LoopInfo64{Flags: unix.LO_FLAGS_AUTOCLEAR}
	copy(info.File_name[:], img)
	if err := unix.IoctlLoopSetStatus64(int(lf.Fd()), &info); err != nil {
		_ = unix.IoctlSetInt(int(lf.Fd()), unix.LOOP_CLR_FD, 0)
		return fmt.Errorf("setting up %s: %w", dev, err)
	}
	if err := unix.Mount(dev, target, "ext4", 0, ""); err != nil {
		_ = unix.IoctlSetInt(int(lf.Fd()), unix.LOOP_CLR_FD, 0)
		return fmt.Errorf("mounting %s (%s) at %s: %w", dev, img, target, err)
	}
	log.Printf("attached %s to %s, mounted at %s", img, dev, target)
	return nil
}

func fileExistsAny(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
