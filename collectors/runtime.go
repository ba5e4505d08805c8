package collectors

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors/hostfs"
	"github.com/nodesnap/nodesnap/internal/human"
	"github.com/nodesnap/nodesnap/isolate"
	"github.com/nodesnap/nodesnap/redact"
)

// The runtime collector gathers the container runtimes' own view: their
// goroutine dumps (incident 001: dockerd's dump showed who held the volume
// lock) and their container lists. Every external command runs through the
// isolation layer with its own deadline; every socket request has its own
// deadline too. Runtimes that are absent are not errors.

func init() {
	Register(Spec{
		Name:           layout.DirRuntime,
		Description:    "container runtimes' own view: pods, containers, images and status from containerd and CRI-O over the CRI API, containers and info from dockerd's API, goroutine dumps (containerd debug socket, dockerd); ctr, crictl and docker listings where installed; each call under its own deadline",
		DefaultEnabled: true,
		DefaultTimeout: 45 * time.Second,
		Needs:          []string{MountprobeName},
		Options:        &runtimeOpts,
		Flags:          runtimeFlags,
		Run:            collectRuntime,
	})
}

// RuntimeOptions are the runtime collector's flags. Socket and config
// paths are host paths (mapped under --root).
type RuntimeOptions struct {
	ContainerdConfig      string        `json:"containerd_config"`
	ContainerdSocket      string        `json:"containerd_socket,omitempty"`
	ContainerdDebugSocket string        `json:"containerd_debug_socket,omitempty"`
	CRIOSocket            string        `json:"crio_socket"`
	DockerSocket          string        `json:"docker_socket"`
	CommandTimeout        time.Duration `json:"command_timeout"`
	RequestTimeout        time.Duration `json:"request_timeout"`
}

var runtimeOpts RuntimeOptions

// Defaults. /run rather than /var/run: under --root, /host/var/run is a
// symlink to the absolute "/run", which would resolve to the container's
// own /run, not the host's.
const (
	defaultContainerdConfig = "/etc/containerd/config.toml"
	defaultContainerdSocket = "/run/containerd/containerd.sock"
	defaultContainerdDebug  = "/run/containerd/debug.sock"
	defaultCRIOSocket       = "/run/crio/crio.sock"
	defaultDockerSocket     = "/run/docker.sock"
)

func runtimeFlags(fs *pflag.FlagSet) {
	o := &runtimeOpts
	*o = RuntimeOptions{}
	fs.StringVar(&o.ContainerdConfig, "containerd-config", defaultContainerdConfig, "runtime: containerd's configuration, read for its socket and debug addresses")
	fs.StringVar(&o.ContainerdSocket, "containerd-socket", "", "runtime: containerd's API socket (default: [grpc] address of --containerd-config, else "+defaultContainerdSocket+")")
	fs.StringVar(&o.ContainerdDebugSocket, "containerd-debug-socket", "", "runtime: containerd's debug/pprof socket (default: [debug] address of --containerd-config, else "+defaultContainerdDebug+")")
	fs.StringVar(&o.CRIOSocket, "crio-socket", defaultCRIOSocket, "runtime: CRI-O's socket")
	fs.StringVar(&o.DockerSocket, "docker-socket", defaultDockerSocket, "runtime: dockerd's API socket")
	fs.DurationVar(&o.CommandTimeout, "runtime-command-timeout", 10*time.Second, "runtime: deadline of each ctr, crictl or docker command")
	fs.DurationVar(&o.RequestTimeout, "runtime-request-timeout", 10*time.Second, "runtime: deadline of each request to a runtime's socket (each CRI call, each dockerd API request)")
}

// rtJob fills one slot of a runtime's items; a CRI session fills several.
type rtJob struct {
	rt  *layout.RuntimeStatus
	idx int
	run func(ctx context.Context) []layout.RuntimeItem
}

func collectRuntime(ctx context.Context, env *Env) error {
	var o RuntimeOptions
	if err := env.Options(&o); err != nil {
		return err
	}
	if o.CommandTimeout <= 0 {
		o.CommandTimeout = 10 * time.Second
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 10 * time.Second
	}
	if o.ContainerdConfig == "" {
		o.ContainerdConfig = defaultContainerdConfig
	}
	if o.CRIOSocket == "" {
		o.CRIOSocket = defaultCRIOSocket
	}
	if o.DockerSocket == "" {
		o.DockerSocket = defaultDockerSocket
	}

	// containerd: its config names the sockets.
	ctd := &layout.RuntimeStatus{Name: "containerd"}
	addrs := ContainerdAddresses{}
	cfgHost := rtRunPath(o.ContainerdConfig)
	if data, err := rtReadHostFile(ctx, env, cfgHost, 1<<20); err == nil {
		ctd.ConfigFile = cfgHost
		addrs = ParseContainerdAddresses(data)
		clean, _ := SanitizeRuntimeConfig(data)
		if err := env.WriteFile("containerd/config.toml", clean); err != nil {
			return err
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		ctd.Notes = append(ctd.Notes, fmt.Sprintf("cannot read %s: %v", cfgHost, err))
	}
	ctd.Socket = rtRunPath(rtFirstNonEmpty(o.ContainerdSocket, addrs.GRPC, defaultContainerdSocket))
	ctd.DebugSocket = rtRunPath(rtFirstNonEmpty(o.ContainerdDebugSocket, addrs.Debug, defaultContainerdDebug))
	ctd.SocketFound = rtSocketExists(ctx, env, ctd.Socket)
	ctd.DebugSocketFound = rtSocketExists(ctx, env, ctd.DebugSocket)
	ctd.Present = ctd.SocketFound || ctd.DebugSocketFound

	crio := &layout.RuntimeStatus{Name: "cri-o", Socket: rtRunPath(o.CRIOSocket)}
	crio.SocketFound = rtSocketExists(ctx, env, crio.Socket)
	crio.Present = crio.SocketFound

	dock := &layout.RuntimeStatus{Name: "docker", Socket: rtRunPath(o.DockerSocket)}
	dock.SocketFound = rtSocketExists(ctx, env, dock.Socket)
	dock.Present = dock.SocketFound

	// Each runtime's items, in the order added; a job fills one slot.
	slots := map[*layout.RuntimeStatus][][]layout.RuntimeItem{}
	var jobs []rtJob
	addN := func(rt *layout.RuntimeStatus, fn func(ctx context.Context) []layout.RuntimeItem) {
		slots[rt] = append(slots[rt], nil)
		jobs = append(jobs, rtJob{rt: rt, idx: len(slots[rt]) - 1, run: fn})
	}
	add := func(rt *layout.RuntimeStatus, fn func(ctx context.Context) layout.RuntimeItem) {
		addN(rt, func(ctx context.Context) []layout.RuntimeItem { return []layout.RuntimeItem{fn(ctx)} })
	}
	// Client programs are extras: run where installed, one note per
	// runtime where not.
	missing := map[*layout.RuntimeStatus]map[string]bool{}
	installed := func(rt *layout.RuntimeStatus, prog string) bool {
		if _, ok := rtFindProgram(ctx, env, prog); ok {
			return true
		}
		if missing[rt] == nil {
			missing[rt] = map[string]bool{}
		}
		missing[rt][prog] = true
		return false
	}
	cmd := func(rt *layout.RuntimeStatus, out, what string, listing bool, prog string, args ...string) {
		if !installed(rt, prog) {
			return
		}
		add(rt, func(ctx context.Context) layout.RuntimeItem {
			it := runtimeCommand(ctx, env, o.CommandTimeout, out, what, prog, args...)
			it.Listing = listing && it.Error == "" && it.Skipped == ""
			return it
		})
	}
	cri := func(rt *layout.RuntimeStatus, dir string) {
		sock := env.Host().Seen(hostfs.Path(rt.Socket))
		addN(rt, func(ctx context.Context) []layout.RuntimeItem {
			return collectCRI(ctx, env, o.RequestTimeout, rt, rt.Socket, sock, dir)
		})
	}
	crictl := func(rt *layout.RuntimeStatus, dir string) {
		if installed(rt, "crictl") {
			rtAddCrictl(rt, add, env, o, env.Host().Seen(hostfs.Path(rt.Socket)), dir)
		}
	}

	if ctd.Present {
		if ctd.DebugSocketFound {
			sock := env.Host().Seen(hostfs.Path(ctd.DebugSocket))
			add(ctd, func(ctx context.Context) layout.RuntimeItem {
				return rtSocketGet(ctx, env, o.RequestTimeout, ctd.DebugSocket, sock, "/debug/pprof/goroutine?debug=2", "containerd/"+layout.RuntimeGoroutineFile, "goroutine dump")
			})
		} else {
			ctd.Notes = append(ctd.Notes, fmt.Sprintf("no goroutine dump: containerd's debug socket %s does not exist; set [debug] address = %q in %s and restart containerd to allow one", ctd.DebugSocket, defaultContainerdDebug, cfgHost))
		}
		if ctd.SocketFound {
			cri(ctd, "containerd")
			sock := env.Host().Seen(hostfs.Path(ctd.Socket))
			cmd(ctd, "containerd/ctr-namespaces.txt", "ctr namespaces ls", false, "ctr", "-a", sock, "namespaces", "ls")
			namespaces := []string{"k8s.io"}
			if dock.Present {
				// dockerd ≥ 20.10 keeps its containers in containerd's "moby".
				namespaces = append(namespaces, "moby")
			}
			for _, ns := range namespaces {
				cmd(ctd, "containerd/"+ns+"/ctr-containers.txt", "ctr -n "+ns+" containers ls", true, "ctr", "-a", sock, "-n", ns, "containers", "ls")
				cmd(ctd, "containerd/"+ns+"/ctr-tasks.txt", "ctr -n "+ns+" tasks ls", false, "ctr", "-a", sock, "-n", ns, "tasks", "ls")
			}
			crictl(ctd, "containerd")
		} else {
			ctd.Notes = append(ctd.Notes, fmt.Sprintf("containerd's API socket %s does not exist (only its debug socket): its containers cannot be listed (see --containerd-socket)", ctd.Socket))
		}
	}
	if crio.Present {
		crio.Notes = append(crio.Notes, "CRI-O serves no goroutine dump on its socket; it writes one to /tmp/crio-goroutine-stacks-*.log on SIGUSR1, which nodesnap does not send")
		cri(crio, "crio")
		crictl(crio, "crio")
	}
	if dock.Present {
		sock := env.Host().Seen(hostfs.Path(dock.Socket))
		add(dock, func(ctx context.Context) layout.RuntimeItem {
			it := rtSocketGet(ctx, env, o.RequestTimeout, dock.Socket, sock, "/debug/pprof/goroutine?debug=2", "docker/"+layout.RuntimeGoroutineFile, "goroutine dump")
			if it.StatusCode == http.StatusNotFound {
				it.Error += ` (dockerd serves /debug/pprof only with "debug": true in /etc/docker/daemon.json)`
			}
			return it
		})
		// dockerd's own API: what `docker ps -a` and `docker info` show,
		// without the docker client.
		add(dock, func(ctx context.Context) layout.RuntimeItem {
			it := rtSocketGetJSON(ctx, env, o.RequestTimeout, dock.Socket, sock, "/containers/json?all=1", "docker/containers.json", "dockerd containers")
			it.Listing = it.Error == ""
			return it
		})
		add(dock, func(ctx context.Context) layout.RuntimeItem {
			return rtSocketGetJSON(ctx, env, o.RequestTimeout, dock.Socket, sock, "/info", "docker/info.json", "dockerd info")
		})
		cmd(dock, "docker/docker-ps.txt", "docker ps -a", true, "docker", "-H", "unix://"+sock, "ps", "-a", "--no-trunc")
		cmd(dock, "docker/docker-info.txt", "docker info", false, "docker", "-H", "unix://"+sock, "info")
	}

	// Everything at once (bounded): a runtime that hangs then costs one
	// deadline per client, not the sum of them.
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	results := make([][]layout.RuntimeItem, len(jobs))
	for i, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			results[i] = j.run(ctx)
		}()
	}
	wg.Wait()
	for i, j := range jobs {
		slots[j.rt][j.idx] = results[i]
	}

	sum := layout.RuntimeSummary{Runtimes: []layout.RuntimeStatus{*ctd, *crio, *dock}}
	failed, firstFailure := 0, ""
	var unlisted []string
	for i, orig := range []*layout.RuntimeStatus{ctd, crio, dock} {
		rt := &sum.Runtimes[i]
		rt.Items = []layout.RuntimeItem{}
		for _, s := range slots[orig] {
			rt.Items = append(rt.Items, s...)
		}
		if !rt.Present {
			daemon := map[string]string{"containerd": "containerd", "cri-o": "crio", "docker": "dockerd"}[rt.Name]
			if p, ok := rtFindProgram(ctx, env, daemon); ok {
				rt.Notes = append(rt.Notes, fmt.Sprintf("%s is installed here (%s) but its socket %s does not exist: it is not running, or listens elsewhere (see --%s-socket)", rt.Name, p, rt.Socket, rtFlagStem(rt.Name)))
			}
			continue
		}
		for _, it := range rt.Items {
			rt.Listed = rt.Listed || it.Listing
			if it.Error != "" {
				if failed == 0 {
					firstFailure = rt.Name + "'s " + it.What
				}
				failed++
				env.Notef("%s: %s: %s", rt.Name, it.What, it.Error)
			}
			if it.Skipped != "" && !strings.HasPrefix(it.Skipped, "not attempted") {
				env.Notef("%s: %s skipped: %s", rt.Name, it.What, it.Skipped)
			}
		}
		for _, prog := range sortedSet(missing[orig]) {
			what := "its listings were not run"
			if rt.Listed {
				what = "its listings were not run (the containers were listed by other means)"
			}
			rt.Notes = append(rt.Notes, fmt.Sprintf("%s is not installed here: %s", prog, what))
		}
		if !rt.Listed {
			unlisted = append(unlisted, rtUnlistedReason(rt, missing[orig]))
		}
		for _, n := range rt.Notes {
			env.Notef("%s: %s", rt.Name, n)
		}
	}
	if err := env.WriteJSON(layout.RuntimeSummaryFile, sum); err != nil {
		return err
	}
	if !ctd.Present && !crio.Present && !dock.Present {
		return fmt.Errorf("no container runtime found (no socket at %s, %s, %s or %s): %w",
			ctd.Socket, ctd.DebugSocket, crio.Socket, dock.Socket, ErrUnsupported)
	}
	for _, u := range unlisted {
		env.Partialf("%s", u)
	}
	if failed > 0 {
		if failed == 1 {
			env.Partialf("%s failed (runtime/summary.json has the details)", firstFailure)
		} else {
			env.Partialf("%d runtime commands or requests failed, first %s (runtime/summary.json has them all)", failed, firstFailure)
		}
	}
	return nil
}

// rtUnlistedReason says, for a customer, why a running runtime's
// containers are not in the bundle.
func rtUnlistedReason(rt *layout.RuntimeStatus, missing map[string]bool) string {
	var tried []string
	for _, it := range rt.Items {
		switch {
		case it.Method != "" && strings.HasSuffix(it.Method, "/Version"):
			tried = append(tried, "the CRI API: "+rtItemOutcome(it))
		case it.Method != "" && strings.HasSuffix(it.Method, "/ListContainers") && !strings.HasPrefix(it.Skipped, "not attempted"):
			tried = append(tried, "the CRI API's ListContainers: "+rtItemOutcome(it))
		case it.URL != "" && strings.Contains(it.URL, "/containers/json"):
			tried = append(tried, "dockerd's API: "+rtItemOutcome(it))
		case len(it.Command) > 0 && !it.Listing && (strings.Contains(it.What, "containers ls") || strings.Contains(it.What, " ps")):
			tried = append(tried, it.What+": "+rtItemOutcome(it))
		}
	}
	if progs := sortedSet(missing); len(progs) > 0 {
		tried = append(tried, "no client program to ask instead ("+strings.Join(progs, ", ")+" not installed)")
	}
	if len(tried) == 0 {
		tried = append(tried, "nothing could be asked")
	}
	return fmt.Sprintf("%s's socket %s exists but its containers could not be listed: %s", rt.Name, rt.Socket, strings.Join(tried, "; "))
}

func rtItemOutcome(it layout.RuntimeItem) string {
	switch {
	case it.Error != "":
		return it.Error
	case it.Skipped != "":
		return it.Skipped
	}
	return "answered, but listed nothing usable"
}

func sortedSet(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func rtAddCrictl(rt *layout.RuntimeStatus, add func(*layout.RuntimeStatus, func(context.Context) layout.RuntimeItem), env *Env, o RuntimeOptions, sock, dir string) {
	ep := "unix://" + sock
	// crictl has its own connection timeout; keep it inside ours.
	to := strconv.Itoa(max(1, int(o.CommandTimeout.Seconds())-1)) + "s"
	base := []string{"--runtime-endpoint", ep, "--image-endpoint", ep, "--timeout", to}
	add(rt, func(ctx context.Context) layout.RuntimeItem {
		it := runtimeCommand(ctx, env, o.CommandTimeout, dir+"/crictl-ps.txt", "crictl ps -a", "crictl", append(base, "ps", "-a")...)
		it.Listing = it.Error == "" && it.Skipped == ""
		return it
	})
	add(rt, func(ctx context.Context) layout.RuntimeItem {
		return runtimeCommand(ctx, env, o.CommandTimeout, dir+"/crictl-pods.txt", "crictl pods", "crictl", append(base, "pods")...)
	})
	add(rt, func(ctx context.Context) layout.RuntimeItem {
		// crictl info prints the CRI configuration, registry credentials
		// included: captured, sanitized, then written.
		return runtimeCommandSanitized(ctx, env, o.CommandTimeout, dir+"/crictl-info.json", "crictl info", "crictl", append(base, "info")...)
	})
}

func rtFlagStem(name string) string {
	if name == "cri-o" {
		return "crio"
	}
	return name
}

// rtFindProgram looks prog up in nodesnap's own PATH, as the isolation layer
// will, but stat()ing each candidate in a worker: a PATH entry may sit on
// a network mount.
func rtFindProgram(ctx context.Context, env *Env, prog string) (string, bool) {
	rtProgMu.Lock()
	defer rtProgMu.Unlock()
	if r, ok := rtProgCache[prog]; ok {
		return r, r != ""
	}
	p, ok := rtLookPath(ctx, env, prog)
	rtProgCache[prog] = p
	return p, ok
}

var (
	rtProgMu    sync.Mutex
	rtProgCache = map[string]string{}
)

func rtLookPath(ctx context.Context, env *Env, prog string) (string, bool) {
	for _, dir := range strings.Split(os.Getenv("PATH"), ":") {
		if dir == "" || !path.IsAbs(dir) {
			continue
		}
		p := path.Join(dir, prog)
		var st isolate.StatResult
		if env.Do(ctx, isolate.OpStat, p, isolate.StatRequest{Path: p, Follow: true}, &st) == nil &&
			st.Mode&syscall.S_IFMT == syscall.S_IFREG && st.Mode&0o111 != 0 {
			return p, true
		}
	}
	return "", false
}

func rtFirstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// rtRunPath maps /var/run/... to /run/...: /var/run is a symlink to
// /run on every distribution Kubernetes runs on, and following it under
// --root would leave the host's tree.
func rtRunPath(p string) string {
	if rest, ok := strings.CutPrefix(p, "/var/run/"); ok {
		return "/run/" + rest
	}
	return p
}

// rtReadHostFile reads a host file through an isolated worker.
func rtReadHostFile(ctx context.Context, env *Env, hostPath string, max int64) ([]byte, error) {
	r, err := env.Host().Read(ctx, hostfs.Path(hostPath), max)
	return r.Data, err
}

// rtSocketExists stats a host path (in a worker) and reports whether it is a
// unix socket.
func rtSocketExists(ctx context.Context, env *Env, hostPath string) bool {
	if hostPath == "" {
		return false
	}
	st, err := env.Host().Stat(ctx, hostfs.Path(hostPath))
	return err == nil && st.Mode&syscall.S_IFMT == syscall.S_IFSOCK
}

// rtSocketGet makes one HTTP GET over a unix socket, under its own deadline,
// and streams the answer (redacted) into the bundle.
func rtSocketGet(ctx context.Context, env *Env, timeout time.Duration, hostSock, sock, reqPath, out, what string) layout.RuntimeItem {
	return rtSocketFetch(ctx, env, timeout, hostSock, sock, reqPath, what, func(body io.Reader) (string, int64, error) {
		f, err := env.Create(out)
		if err != nil {
			return "", 0, err
		}
		n, cerr := io.Copy(f, io.LimitReader(body, rtAnswerLimit(env)+1))
		if err := f.Close(); cerr == nil {
			cerr = err
		}
		return out, n, cerr
	})
}

// rtSocketGetJSON is rtSocketGet for a JSON answer (dockerd's API answers on
// one line): it is read whole (bounded), indented so that the redactor
// sees one value per line, sanitized of registry credentials, then written.
func rtSocketGetJSON(ctx context.Context, env *Env, timeout time.Duration, hostSock, sock, reqPath, out, what string) layout.RuntimeItem {
	return rtSocketFetch(ctx, env, timeout, hostSock, sock, reqPath, what, func(body io.Reader) (string, int64, error) {
		limit := rtAnswerLimit(env)
		data, err := io.ReadAll(io.LimitReader(body, limit+1))
		if err != nil {
			return "", int64(len(data)), err
		}
		if int64(len(data)) > limit {
			return "", int64(len(data)), fmt.Errorf("the answer is larger than %d bytes; not kept", limit)
		}
		clean, err := RuntimeJSON(data)
		if err != nil {
			return "", int64(len(data)), err
		}
		return out, int64(len(data)), env.WriteFile(out, clean)
	})
}

func rtAnswerLimit(env *Env) int64 {
	if env.MaxFileBytes <= 0 || env.MaxFileBytes > 64<<20 {
		return 64 << 20
	}
	return env.MaxFileBytes
}

// RuntimeJSON indents a runtime's JSON answer and removes registry
// credentials from it. An answer that is not JSON is an error.
func RuntimeJSON(data []byte) ([]byte, error) {
	var buf bytes.Buffer
	if err := json.Indent(&buf, bytes.TrimSpace(data), "", "  "); err != nil {
		return nil, fmt.Errorf("the answer is not JSON: %w", err)
	}
	buf.WriteByte('\n')
	clean, _ := SanitizeRuntimeConfig(buf.Bytes())
	return clean, nil
}

// rtSocketFetch makes one HTTP GET over a unix socket under its own
// deadline; keep stores a 200 answer's body and returns the file written.
func rtSocketFetch(ctx context.Context, env *Env, timeout time.Duration, hostSock, sock, reqPath, what string, keep func(io.Reader) (string, int64, error)) (it layout.RuntimeItem) {
	it = layout.RuntimeItem{What: what, URL: "unix://" + hostSock + reqPath}
	start := time.Now()
	defer func() { it.DurationSeconds = time.Since(start).Seconds() }()
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	d := &net.Dialer{Timeout: timeout}
	client := &http.Client{Transport: &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "unix", sock)
		},
		ResponseHeaderTimeout: timeout,
		DisableKeepAlives:     true,
		DisableCompression:    true,
	}}
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, "http://localhost"+reqPath, nil)
	if err != nil {
		it.Error = err.Error()
		return it
	}
	resp, err := client.Do(req)
	if err != nil {
		it.Error = rtDescribeSocketError(err, timeout)
		it.TimedOut = rctx.Err() != nil
		return it
	}
	defer resp.Body.Close()
	it.StatusCode = resp.StatusCode
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		it.Error = fmt.Sprintf("answered %s: %s", resp.Status, strings.Join(strings.Fields(string(b)), " "))
		return it
	}
	file, n, err := keep(resp.Body)
	it.File, it.Bytes = file, n
	if err != nil {
		it.Error = "reading the answer: " + rtDescribeSocketError(err, timeout)
		it.TimedOut = rctx.Err() != nil
	}
	return it
}

func rtDescribeSocketError(err error, timeout time.Duration) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused: the socket exists but nothing accepts on it (the daemon is down)"
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		return fmt.Sprintf("no answer within %s: the daemon accepted the connection but did not respond", timeout)
	default:
		return err.Error()
	}
}

// runtimeCommand runs a client under its own deadline into the bundle. A
// client that is not installed is skipped, not an error: the runtime's
// socket answered the rest.
func runtimeCommand(ctx context.Context, env *Env, timeout time.Duration, out, what, prog string, args ...string) layout.RuntimeItem {
	it := layout.RuntimeItem{What: what, Command: append([]string{prog}, args...)}
	if _, ok := rtFindProgram(ctx, env, prog); !ok {
		it.Skipped = prog + " is not installed"
		return it
	}
	res, err := env.Command(ctx, timeout, out, prog, args...)
	it.DurationSeconds = res.Duration.Seconds()
	it.TimedOut = res.TimedOut
	if errors.Is(err, ErrUnsupported) {
		it.Skipped = prog + " is not installed"
		return it
	}
	ec := res.ExitCode
	it.ExitCode = &ec
	// The file exists whatever happened; what the client printed before
	// failing or being killed is kept.
	it.File = out
	if err != nil {
		it.Error = err.Error()
	}
	return it
}

// runtimeCommandSanitized is runtimeCommand for output that may hold
// credentials the line redactor cannot recognise (a registry "auth" value
// is base64 of user:password): the output is held in memory (bounded),
// sanitized, then written.
func runtimeCommandSanitized(ctx context.Context, env *Env, timeout time.Duration, out, what, prog string, args ...string) layout.RuntimeItem {
	it := layout.RuntimeItem{What: what, Command: append([]string{prog}, args...)}
	if _, ok := rtFindProgram(ctx, env, prog); !ok {
		it.Skipped = prog + " is not installed"
		return it
	}
	limit := int(env.MaxFileBytes)
	if limit <= 0 || limit > 64<<20 {
		limit = 64 << 20
	}
	stdout := &isolate.HeadBuffer{Max: limit}
	stderr := &isolate.HeadBuffer{Max: 64 << 10}
	var environ []string
	for _, kv := range os.Environ() {
		// The kubelet token has no business in a runtime client.
		if !strings.HasPrefix(kv, KubeletTokenEnv+"=") {
			environ = append(environ, kv)
		}
	}
	res, err := isolate.Run(ctx, timeout, isolate.Spec{Path: prog, Args: args, Stdout: stdout, Stderr: stderr,
		Env: append(environ, "LC_ALL=C", "NO_COLOR=1")})
	it.DurationSeconds = res.Duration.Seconds()
	it.TimedOut = res.TimedOut
	if errors.Is(err, isolate.ErrNotFound) {
		it.Skipped = prog + " is not installed"
		return it
	}
	ec := res.ExitCode
	it.ExitCode = &ec
	if err != nil {
		it.Error = err.Error()
		if res.Evidence != nil {
			it.Error += " [" + res.Evidence.String() + "]"
		}
	} else if res.ExitCode != 0 {
		it.Error = fmt.Sprintf("%s exited with status %d: %s", prog, res.ExitCode, human.FirstLine(stderr.String()))
	}
	if data := stdout.String(); data != "" {
		clean, _ := SanitizeRuntimeConfig([]byte(data))
		if werr := env.WriteFile(out, clean); werr != nil && it.Error == "" {
			it.Error = werr.Error()
		} else {
			it.File = out
			it.Bytes = int64(len(data))
		}
	}
	if s := stderr.String(); s != "" {
		_ = env.WriteFile(out+".stderr", []byte(s))
	}
	return it
}

// ContainerdAddresses are the socket addresses in a containerd config.
type ContainerdAddresses struct {
	GRPC  string `json:"grpc,omitempty"`
	TTRPC string `json:"ttrpc,omitempty"`
	Debug string `json:"debug,omitempty"`
}

// ParseContainerdAddresses reads the address keys of the [grpc], [ttrpc]
// and [debug] tables of a containerd config.toml (versions 1 to 3 all
// keep them there). It understands just enough TOML for that: table
// headers, comments, basic and literal strings; anything else is ignored.
func ParseContainerdAddresses(data []byte) ContainerdAddresses {
	var a ContainerdAddresses
	table := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		if line[0] == '[' {
			end := strings.IndexByte(line, ']')
			if end < 0 || strings.HasPrefix(line, "[[") {
				table = ""
				continue
			}
			table = strings.TrimSpace(line[1:end])
			continue
		}
		key, val, ok := strings.Cut(line, "=")
		if !ok || strings.TrimSpace(key) != "address" {
			continue
		}
		s, ok := rtTOMLString(strings.TrimSpace(val))
		if !ok {
			continue
		}
		switch table {
		case "grpc":
			a.GRPC = s
		case "ttrpc":
			a.TTRPC = s
		case "debug":
			a.Debug = s
		}
	}
	return a
}

// rtTOMLString decodes a TOML basic ("...") or literal ('...') string at the
// start of v, ignoring what follows it (a comment).
func rtTOMLString(v string) (string, bool) {
	if len(v) < 2 {
		return "", false
	}
	switch v[0] {
	case '\'':
		end := strings.IndexByte(v[1:], '\'')
		if end < 0 {
			return "", false
		}
		return v[1 : 1+end], true
	case '"':
		var b strings.Builder
		for i := 1; i < len(v); i++ {
			c := v[i]
			switch {
			case c == '"':
				return b.String(), true
			case c == '\\' && i+1 < len(v):
				i++
				switch v[i] {
				case 'n':
					b.WriteByte('\n')
				case 't':
					b.WriteByte('\t')
				case '\\', '"':
					b.WriteByte(v[i])
				default:
					// \uXXXX and friends never occur in a socket path.
					return "", false
				}
			default:
				b.WriteByte(c)
			}
		}
		return "", false
	}
	return "", false
}

// Registry credentials in containerd's TOML and in crictl's JSON: "auth"
// (base64 of user:password) is not a key the line redactor treats as
// secret, so these are removed here first.
var (
	rtTOMLSecretRe = regexp.MustCompile(`(?i)\b(auth|password|identitytoken|identity_token|registrytoken|registry_token|token|secret)(\s*=\s*)("(?:[^"\\]|\\.)*"|'[^']*')`)
	rtJSONSecretRe = regexp.MustCompile(`(?i)("(?:auth|password|identitytoken|identity_token|registrytoken|registry_token|token|secret)"\s*:\s*)"(?:[^"\\]|\\.)*"`)
)

// SanitizeRuntimeConfig replaces registry credentials in a containerd
// config.toml or a crictl info JSON with [REDACTED] and says how many.
func SanitizeRuntimeConfig(data []byte) ([]byte, int) {
	n := 0
	out := rtTOMLSecretRe.ReplaceAllFunc(data, func(m []byte) []byte {
		sub := rtTOMLSecretRe.FindSubmatch(m)
		n++
		return []byte(string(sub[1]) + string(sub[2]) + `"` + redact.Marker + `"`)
	})
	out = rtJSONSecretRe.ReplaceAllFunc(out, func(m []byte) []byte {
		sub := rtJSONSecretRe.FindSubmatch(m)
		if bytes.HasSuffix(m, []byte(`""`)) {
			return m
		}
		n++
		return []byte(string(sub[1]) + `"` + redact.Marker + `"`)
	})
	return out, n
}
