package runtime

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/collectors/hostfs"
)

// The runtime collector gathers the container runtimes' own view: their
// goroutine dumps (incident 001: dockerd's dump showed who held the volume
// lock) and their container lists. Every external command runs through the
// isolation layer with its own deadline; every socket request has its own
// deadline too. Runtimes that are absent are not errors.

func init() {
	collectors.Register(collectors.Spec{
		Name:           layout.DirRuntime,
		Description:    "container runtimes' own view: pods, containers, images and status from containerd and CRI-O over the CRI API, containers and info from dockerd's API, goroutine dumps (containerd debug socket, dockerd); ctr, crictl and docker listings where installed; each call under its own deadline",
		Requires:       "root and the runtime's sockets: containerd (/run/containerd/containerd.sock, and its debug socket), CRI-O (/var/run/crio/crio.sock), dockerd (/var/run/docker.sock)",
		DefaultEnabled: true,
		DefaultTimeout: 45 * time.Second,
		After:          []string{collectors.MountprobeName},
		Options:        &opts,
		Flags:          flags,
		Files:          files,
		Run:            collect,
	})
}

// Options are the runtime collector's flags. Socket and config
// paths are host paths (mapped under --root).
type Options struct {
	ContainerdConfig      string        `json:"containerd_config"`
	ContainerdSocket      string        `json:"containerd_socket,omitempty"`
	ContainerdDebugSocket string        `json:"containerd_debug_socket,omitempty"`
	CRIOSocket            string        `json:"crio_socket"`
	DockerSocket          string        `json:"docker_socket"`
	CommandTimeout        time.Duration `json:"command_timeout"`
	RequestTimeout        time.Duration `json:"request_timeout"`
}

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

// defaults are the options no flag changed: the one place a default is
// written.
var defaults = Options{ContainerdConfig: defaultContainerdConfig, CRIOSocket: defaultCRIOSocket,
	DockerSocket: defaultDockerSocket, CommandTimeout: 10 * time.Second, RequestTimeout: 10 * time.Second}

// opts are the options the flags set (in the supervisor); they reach the
// collector's child as JSON.
var opts = defaults

func flags(fs *pflag.FlagSet) {
	opts = defaults
	o := &opts
	fs.StringVar(&o.ContainerdConfig, "containerd-config", o.ContainerdConfig, "runtime: containerd's configuration, read for its socket and debug addresses")
	fs.StringVar(&o.ContainerdSocket, "containerd-socket", o.ContainerdSocket, "runtime: containerd's API socket (default: [grpc] address of --containerd-config, else "+defaultContainerdSocket+")")
	fs.StringVar(&o.ContainerdDebugSocket, "containerd-debug-socket", o.ContainerdDebugSocket, "runtime: containerd's debug/pprof socket (default: [debug] address of --containerd-config, else "+defaultContainerdDebug+")")
	fs.StringVar(&o.CRIOSocket, "crio-socket", o.CRIOSocket, "runtime: CRI-O's socket")
	fs.StringVar(&o.DockerSocket, "docker-socket", o.DockerSocket, "runtime: dockerd's API socket")
	fs.DurationVar(&o.CommandTimeout, "runtime-command-timeout", o.CommandTimeout, "runtime: deadline of each ctr, crictl or docker command")
	fs.DurationVar(&o.RequestTimeout, "runtime-request-timeout", o.RequestTimeout, "runtime: deadline of each request to a runtime's socket (each CRI call, each dockerd API request)")
}

// rtJob fills one slot of a runtime's items; a CRI session fills several.
type rtJob struct {
	rt  *layout.RuntimeStatus
	idx int
	run func(ctx context.Context) []layout.RuntimeItem
}

func collect(ctx context.Context, env *collectors.Env) error {
	o := defaults
	if err := env.Options(&o); err != nil {
		return err
	}
	if o.CommandTimeout <= 0 {
		o.CommandTimeout = defaults.CommandTimeout
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = defaults.RequestTimeout
	}
	if o.ContainerdConfig == "" {
		o.ContainerdConfig = defaults.ContainerdConfig
	}
	if o.CRIOSocket == "" {
		o.CRIOSocket = defaults.CRIOSocket
	}
	if o.DockerSocket == "" {
		o.DockerSocket = defaults.DockerSocket
	}

	// containerd: its config names the sockets.
	ctd := &layout.RuntimeStatus{Name: "containerd"}
	addrs := ContainerdAddresses{}
	cfgHost := runPath(o.ContainerdConfig)
	if data, err := readHostFile(ctx, env, cfgHost, 1<<20); err == nil {
		ctd.ConfigFile = cfgHost
		addrs = ParseContainerdAddresses(data)
		clean, _ := SanitizeRuntimeConfig(data)
		if err := env.WriteFile("containerd/config.toml", clean); err != nil {
			return err
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		ctd.Notes = append(ctd.Notes, fmt.Sprintf("cannot read %s: %v", cfgHost, err))
	}
	ctd.Socket = runPath(firstNonEmpty(o.ContainerdSocket, addrs.GRPC, defaultContainerdSocket))
	ctd.DebugSocket = runPath(firstNonEmpty(o.ContainerdDebugSocket, addrs.Debug, defaultContainerdDebug))
	ctd.SocketFound = socketExists(ctx, env, ctd.Socket)
	ctd.DebugSocketFound = socketExists(ctx, env, ctd.DebugSocket)
	ctd.Present = ctd.SocketFound || ctd.DebugSocketFound

	crio := &layout.RuntimeStatus{Name: "cri-o", Socket: runPath(o.CRIOSocket)}
	crio.SocketFound = socketExists(ctx, env, crio.Socket)
	crio.Present = crio.SocketFound

	dock := &layout.RuntimeStatus{Name: "docker", Socket: runPath(o.DockerSocket)}
	dock.SocketFound = socketExists(ctx, env, dock.Socket)
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
		if _, ok := findProgram(ctx, env, prog); ok {
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
			addCrictl(rt, add, env, o, env.Host().Seen(hostfs.Path(rt.Socket)), dir)
		}
	}

	if ctd.Present {
		if ctd.DebugSocketFound {
			sock := env.Host().Seen(hostfs.Path(ctd.DebugSocket))
			add(ctd, func(ctx context.Context) layout.RuntimeItem {
				return socketGet(ctx, env, o.RequestTimeout, ctd.DebugSocket, sock, "/debug/pprof/goroutine?debug=2", "containerd/"+layout.RuntimeGoroutineFile, "goroutine dump")
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
			it := socketGet(ctx, env, o.RequestTimeout, dock.Socket, sock, "/debug/pprof/goroutine?debug=2", "docker/"+layout.RuntimeGoroutineFile, "goroutine dump")
			if it.StatusCode == http.StatusNotFound {
				it.Error += ` (dockerd serves /debug/pprof only with "debug": true in /etc/docker/daemon.json)`
			}
			return it
		})
		// dockerd's own API: what `docker ps -a` and `docker info` show,
		// without the docker client.
		add(dock, func(ctx context.Context) layout.RuntimeItem {
			it := socketGetJSON(ctx, env, o.RequestTimeout, dock.Socket, sock, "/containers/json?all=1", "docker/containers.json", "dockerd containers")
			it.Listing = it.Error == ""
			return it
		})
		add(dock, func(ctx context.Context) layout.RuntimeItem {
			return socketGetJSON(ctx, env, o.RequestTimeout, dock.Socket, sock, "/info", "docker/info.json", "dockerd info")
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
			if p, ok := findProgram(ctx, env, daemon); ok {
				rt.Notes = append(rt.Notes, fmt.Sprintf("%s is installed here (%s) but its socket %s does not exist: it is not running, or listens elsewhere (see --%s-socket)", rt.Name, p, rt.Socket, flagStem(rt.Name)))
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
			unlisted = append(unlisted, unlistedReason(rt, missing[orig]))
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
			ctd.Socket, ctd.DebugSocket, crio.Socket, dock.Socket, collectors.ErrUnsupported)
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

// unlistedReason says, for a customer, why a running runtime's
// containers are not in the bundle.
func unlistedReason(rt *layout.RuntimeStatus, missing map[string]bool) string {
	var tried []string
	for _, it := range rt.Items {
		switch {
		case it.Method != "" && strings.HasSuffix(it.Method, "/Version"):
			tried = append(tried, "the CRI API: "+itemOutcome(it))
		case it.Method != "" && strings.HasSuffix(it.Method, "/ListContainers") && !strings.HasPrefix(it.Skipped, "not attempted"):
			tried = append(tried, "the CRI API's ListContainers: "+itemOutcome(it))
		case it.URL != "" && strings.Contains(it.URL, "/containers/json"):
			tried = append(tried, "dockerd's API: "+itemOutcome(it))
		case len(it.Command) > 0 && !it.Listing && (strings.Contains(it.What, "containers ls") || strings.Contains(it.What, " ps")):
			tried = append(tried, it.What+": "+itemOutcome(it))
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

func itemOutcome(it layout.RuntimeItem) string {
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

func addCrictl(rt *layout.RuntimeStatus, add func(*layout.RuntimeStatus, func(context.Context) layout.RuntimeItem), env *collectors.Env, o Options, sock, dir string) {
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

func flagStem(name string) string {
	if name == "cri-o" {
		return "crio"
	}
	return name
}
