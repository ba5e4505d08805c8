package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	criapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors"
)

// The runtime collector asks containerd and CRI-O what they run through
// the CRI API itself (gRPC over the runtime's unix socket, the kubelet's
// own way in), so that it needs no crictl or ctr: nodesnap's image holds
// only nodesnap. The answers are written as JSON in the protobuf JSON
// mapping, the same field names as `crictl ... -o json`.

// criMaxMessage bounds one answer: ListContainers or ListImages of a big
// node is a few MiB; the kubelet allows 16 MiB.
const criMaxMessage = 64 << 20

// criCall is one CRI method: what it is called in summary.json, its gRPC
// method name, the bundle file it writes and how to call it.
type criCall struct {
	what, method, file string
	// listing: a success means the runtime's containers were listed.
	listing bool
	call    func(ctx context.Context, rs criapi.RuntimeServiceClient, is criapi.ImageServiceClient) (proto.Message, error)
}

var criCalls = []criCall{
	{"CRI runtime status", criapi.RuntimeService_Status_FullMethodName, "cri-status.json", false,
		func(ctx context.Context, rs criapi.RuntimeServiceClient, _ criapi.ImageServiceClient) (proto.Message, error) {
			return rs.Status(ctx, &criapi.StatusRequest{Verbose: true})
		}},
	{"CRI pod sandboxes", criapi.RuntimeService_ListPodSandbox_FullMethodName, layout.CRIPodsFile, true,
		func(ctx context.Context, rs criapi.RuntimeServiceClient, _ criapi.ImageServiceClient) (proto.Message, error) {
			return rs.ListPodSandbox(ctx, &criapi.ListPodSandboxRequest{})
		}},
	{"CRI containers", criapi.RuntimeService_ListContainers_FullMethodName, layout.CRIContainersFile, true,
		func(ctx context.Context, rs criapi.RuntimeServiceClient, _ criapi.ImageServiceClient) (proto.Message, error) {
			// No filter: every state, exited containers included.
			return rs.ListContainers(ctx, &criapi.ListContainersRequest{})
		}},
	{"CRI images", criapi.ImageService_ListImages_FullMethodName, "cri-images.json", false,
		func(ctx context.Context, _ criapi.RuntimeServiceClient, is criapi.ImageServiceClient) (proto.Message, error) {
			return is.ListImages(ctx, &criapi.ListImagesRequest{})
		}},
	{"CRI image filesystem", criapi.ImageService_ImageFsInfo_FullMethodName, "cri-imagefs.json", false,
		func(ctx context.Context, _ criapi.RuntimeServiceClient, is criapi.ImageServiceClient) (proto.Message, error) {
			return is.ImageFsInfo(ctx, &criapi.ImageFsInfoRequest{})
		}},
	{"CRI container stats", criapi.RuntimeService_ListContainerStats_FullMethodName, "cri-container-stats.json", false,
		func(ctx context.Context, rs criapi.RuntimeServiceClient, _ criapi.ImageServiceClient) (proto.Message, error) {
			return rs.ListContainerStats(ctx, &criapi.ListContainerStatsRequest{})
		}},
}

// criVersionFile is the first call's file; Version also tells whether the
// socket answers at all.
const criVersionFile = "cri-version.json"

// collectCRI asks one runtime's CRI socket (hostSock as the node names it,
// sock as nodesnap reaches it) for its version, then everything else at
// once, each call under its own deadline. Version goes first, alone: a
// socket that accepts but never answers costs that one deadline, and the
// other calls are not attempted. It fills in rt's CRI fields and returns
// one item per call.
func collectCRI(ctx context.Context, env *collectors.Env, timeout time.Duration, rt *layout.RuntimeStatus, hostSock, sock, dir string) []layout.RuntimeItem {
	url := "unix://" + hostSock
	conn, err := criDial(sock, timeout)
	if err != nil {
		// NewClient does not connect; this is a bad option, not a socket.
		return []layout.RuntimeItem{{What: "CRI version", Method: criapi.RuntimeService_Version_FullMethodName, URL: url, Error: err.Error()}}
	}
	defer conn.Close()
	rs := criapi.NewRuntimeServiceClient(conn)
	is := criapi.NewImageServiceClient(conn)

	items := make([]layout.RuntimeItem, 2+len(criCalls))
	statusItem := layout.RuntimeItem{What: "CRI container statuses", Method: criapi.RuntimeService_ContainerStatus_FullMethodName, URL: url}
	var ver *criapi.VersionResponse
	items[0] = criDo(ctx, env, timeout, url, dir+"/"+criVersionFile, "CRI version", criapi.RuntimeService_Version_FullMethodName,
		func(ctx context.Context) (proto.Message, error) {
			v, err := rs.Version(ctx, &criapi.VersionRequest{Version: "v1"})
			ver = v
			return v, err
		})
	if items[0].Error != "" || items[0].Skipped != "" {
		why := "not attempted: the CRI socket did not answer Version"
		if items[0].Skipped != "" {
			why = "not attempted: " + items[0].Skipped
		}
		for i, c := range criCalls {
			items[1+i] = layout.RuntimeItem{What: c.what, Method: c.method, URL: url, Skipped: why}
		}
		statusItem.Skipped = why
		items[len(items)-1] = statusItem
		return items
	}
	rt.CRIRuntimeName, rt.CRIRuntimeVersion, rt.CRIAPIVersion = ver.GetRuntimeName(), ver.GetRuntimeVersion(), ver.GetRuntimeApiVersion()

	var wg sync.WaitGroup
	var containers *criapi.ListContainersResponse
	for i, c := range criCalls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			it := criDo(ctx, env, timeout, url, dir+"/"+c.file, c.what, c.method,
				func(ctx context.Context) (proto.Message, error) {
					m, err := c.call(ctx, rs, is)
					if l, ok := m.(*criapi.ListContainersResponse); ok && err == nil {
						containers = l
					}
					return m, err
				})
			it.Listing = c.listing && it.Error == "" && it.Skipped == ""
			items[1+i] = it
		}()
	}
	wg.Wait()
	if containers == nil {
		statusItem.Skipped = "not attempted: ListContainers did not answer"
	} else {
		statusItem = criContainerStatuses(ctx, env, timeout, rs, statusItem, containers.GetContainers(), dir+"/cri-container-status.json")
	}
	items[len(items)-1] = statusItem
	return items
}

// criMaxStatuses bounds the ContainerStatus calls of one run: a node runs
// at most a few hundred containers (the kubelet's default is 110 pods).
const criMaxStatuses = 2000

// criContainerStatuses asks the status of every container (not verbose:
// the verbose answer holds the OCI spec, environment variables included).
// The status has what the list lacks: the mounts (which host paths, pod
// volumes among them, a container holds), the exit code and reason, and
// start and finish times. Four calls at a time, each under its own
// deadline; after a call that times out no more are made.
func criContainerStatuses(ctx context.Context, env *collectors.Env, timeout time.Duration, rs criapi.RuntimeServiceClient, base layout.RuntimeItem, cs []*criapi.Container, out string) (it layout.RuntimeItem) {
	it = base
	start := time.Now()
	defer func() { it.DurationSeconds = time.Since(start).Seconds() }()
	if len(cs) > criMaxStatuses {
		cs = cs[:criMaxStatuses]
	}
	statuses := make([]*criapi.ContainerStatus, len(cs))
	errs := make([]string, len(cs))
	var mu sync.Mutex
	stalled := false
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			mu.Lock()
			stop := stalled
			mu.Unlock()
			if stop {
				errs[i] = "not attempted after a call that timed out"
				return
			}
			cctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			r, err := rs.ContainerStatus(cctx, &criapi.ContainerStatusRequest{ContainerId: c.GetId()})
			if err != nil {
				skipped, failed, to := criDescribeError(err, criapi.RuntimeService_ContainerStatus_FullMethodName, timeout)
				errs[i] = failed + skipped
				if to {
					mu.Lock()
					stalled = true
					mu.Unlock()
				}
				return
			}
			statuses[i] = r.GetStatus()
		}()
	}
	wg.Wait()
	var kept []*criapi.ContainerStatus
	var failed []string
	for i, st := range statuses {
		switch {
		case st != nil:
			kept = append(kept, st)
		case strings.Contains(errs[i], "NotFound"):
			// Removed since it was listed: nothing to report.
		default:
			failed = append(failed, cs[i].GetId()+": "+errs[i])
		}
	}
	data, err := criStatusesJSON(kept)
	if err != nil {
		it.Error = fmt.Sprintf("encoding the container statuses: %v", err)
		return it
	}
	if err := env.WriteFile(out, data); err != nil {
		it.Error = err.Error()
		return it
	}
	it.File, it.Bytes = out, int64(len(data))
	if len(failed) > 0 {
		it.Error = fmt.Sprintf("%d of %d container statuses failed; first: %s", len(failed), len(cs), failed[0])
		it.TimedOut = stalled
	}
	return it
}

// criStatusesJSON writes container statuses as {"statuses": [...]}, each
// in the CRI JSON mapping.
func criStatusesJSON(sts []*criapi.ContainerStatus) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString(`{"statuses":[`)
	for i, st := range sts {
		if i > 0 {
			buf.WriteByte(',')
		}
		b, err := protojson.MarshalOptions{EmitDefaultValues: true}.Marshal(st)
		if err != nil {
			return nil, err
		}
		buf.Write(b)
	}
	buf.WriteString("]}")
	return RuntimeJSON(buf.Bytes())
}

// criDial makes a client for a unix socket. It does not connect: the first
// call does, under that call's deadline.
func criDial(sock string, timeout time.Duration) (*grpc.ClientConn, error) {
	d := &net.Dialer{Timeout: timeout}
	return grpc.NewClient("passthrough:///localhost",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "unix", sock)
		}),
		grpc.WithAuthority("localhost"),
		grpc.WithNoProxy(),
		grpc.WithUserAgent("nodesnap"),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(criMaxMessage)),
	)
}

// criDo makes one call under its own deadline and writes its answer.
func criDo(ctx context.Context, env *collectors.Env, timeout time.Duration, url, out, what, method string, call func(context.Context) (proto.Message, error)) (it layout.RuntimeItem) {
	it = layout.RuntimeItem{What: what, Method: method, URL: url}
	start := time.Now()
	defer func() { it.DurationSeconds = time.Since(start).Seconds() }()
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	msg, err := call(cctx)
	if err != nil {
		it.Skipped, it.Error, it.TimedOut = criDescribeError(err, method, timeout)
		return it
	}
	data, err := criJSON(msg)
	if err != nil {
		it.Error = fmt.Sprintf("encoding the answer of %s: %v", method, err)
		return it
	}
	if err := env.WriteFile(out, data); err != nil {
		it.Error = err.Error()
		return it
	}
	it.File, it.Bytes = out, int64(len(data))
	return it
}

// criDescribeError words a failed call for a customer. A method the
// runtime does not implement is skipped, not failed.
func criDescribeError(err error, method string, timeout time.Duration) (skipped, failed string, timedOut bool) {
	st, _ := status.FromError(err)
	switch st.Code() {
	case codes.Unimplemented:
		if strings.HasSuffix(method, "/Version") {
			return "the runtime does not serve CRI v1 on this socket (its CRI plugin is disabled, or it is too old): " + st.Message(), "", false
		}
		return "the runtime does not implement " + method + ": " + st.Message(), "", false
	case codes.DeadlineExceeded:
		return "", fmt.Sprintf("no answer within %s: the runtime accepted the connection but did not respond", timeout), true
	case codes.Unavailable:
		msg := st.Message()
		if strings.Contains(msg, "connection refused") {
			return "", "connection refused: the socket exists but nothing accepts on it (the runtime is down)", false
		}
		return "", "the runtime's socket is unavailable: " + msg, false
	case codes.Canceled:
		return "", "stopped: the collector's deadline was reached", true
	}
	return "", fmt.Sprintf("%s failed: %s: %s", method, st.Code(), st.Message()), false
}

// criJSON encodes an answer as indented JSON with registry credentials
// removed. A verbose Status carries the runtime's configuration as JSON
// strings in its info map; those are decoded into objects (readable, and
// one credential per line for the redactor) and sanitized.
func criJSON(msg proto.Message) ([]byte, error) {
	var info map[string]string
	if s, ok := msg.(*criapi.StatusResponse); ok && len(s.GetInfo()) > 0 {
		info = s.GetInfo()
		s = proto.Clone(s).(*criapi.StatusResponse)
		s.Info = nil
		msg = s
	}
	raw, err := protojson.MarshalOptions{EmitDefaultValues: true}.Marshal(msg)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if info == nil {
		if err := json.Indent(&out, raw, "", "  "); err != nil {
			return nil, err
		}
	} else {
		// protojson's object, with "info" put back decoded.
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(raw, &obj); err != nil {
			return nil, err
		}
		obj["info"], err = json.Marshal(CRIStatusInfo(info))
		if err != nil {
			return nil, err
		}
		b, err := json.MarshalIndent(obj, "", "  ")
		if err != nil {
			return nil, err
		}
		out.Write(b)
	}
	out.WriteByte('\n')
	clean, _ := SanitizeRuntimeConfig(out.Bytes())
	return clean, nil
}

// CRIStatusInfo turns the info map of a verbose CRI Status (values are
// JSON documents as strings: containerd's "config", CRI-O's "config" and
// "lastCNILoadStatus") into JSON: a value that is JSON is kept as such, any
// other value as a string. Registry credentials are removed.
func CRIStatusInfo(info map[string]string) map[string]json.RawMessage {
	keys := make([]string, 0, len(info))
	for k := range info {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make(map[string]json.RawMessage, len(info))
	for _, k := range keys {
		v := []byte(info[k])
		var buf bytes.Buffer
		if json.Valid(v) && json.Indent(&buf, v, "", "  ") == nil {
			clean, _ := SanitizeRuntimeConfig(buf.Bytes())
			if json.Valid(clean) {
				out[k] = clean
				continue
			}
		}
		// Text: sanitized as text (a TOML excerpt, say), then quoted.
		text, _ := SanitizeRuntimeConfig(v)
		quoted, err := json.Marshal(string(text))
		if err != nil {
			quoted = []byte(`"[unreadable value removed]"`)
		}
		out[k] = quoted
	}
	return out
}
