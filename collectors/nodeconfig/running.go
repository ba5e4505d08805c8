package nodeconfig

import (
	"context"
	"path"
	"strconv"
	"strings"

	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/collectors/hostfs"
	"github.com/nodesnap/nodesnap/collectors/internal/daemon"
)

// The configuration a node's daemons actually run with is named on their
// command lines (kubelet --config and --kubeconfig, containerd --config):
// a fixed list of paths finds the defaults, and on a real node collected a
// containerd config the running containerd did not use. runningConfigs
// reads the command lines of the kubelet and the runtimes the kernel
// vouches for (package daemon, each through an isolated worker:
// /proc/<pid>/cmdline takes the process's mmap lock) and
// returns the files they name, read through /proc/<pid>/root so the path
// resolves in the daemon's own mount namespace.

// configFlags are the flags of each daemon whose value is a file to
// collect ("kubelet" also for the kubelet under another name: kubelite,
// hyperkube).
var configFlags = map[string][]string{
	"kubelet":    {"--config", "--kubeconfig", "--bootstrap-kubeconfig"},
	"containerd": {"--config", "-c"},
	"crio":       {"--config"},
	"dockerd":    {"--config-file"},
}

// runningConfig is a file a running daemon's command line names.
type runningConfig struct {
	// Path is the path as the daemon names it; Via is where nodesnap reads
	// it (/proc/<pid>/root/<path>).
	Path string
	Via  hostfs.Path
	// From says whose flag named it: "kubelet --config (pid 812)".
	From string
}

// ConfigPathsFromCmdline returns the values of flags in args, in order:
// "--flag=value", "--flag value", "-c value"; relative values are joined
// to cwd when it is an absolute path, else dropped.
func ConfigPathsFromCmdline(args, flags []string, cwd string) []FlagValue {
	var out []FlagValue
	for i := 1; i < len(args); i++ {
		a := args[i]
		for _, f := range flags {
			var v string
			switch {
			case strings.HasPrefix(a, f+"="):
				v = a[len(f)+1:]
			case a == f && i+1 < len(args):
				v = args[i+1]
			default:
				continue
			}
			if v == "" {
				continue
			}
			if !path.IsAbs(v) {
				if !path.IsAbs(cwd) {
					continue
				}
				v = path.Join(cwd, v)
			}
			out = append(out, FlagValue{Flag: f, Value: path.Clean(v)})
		}
	}
	return out
}

// FlagValue is one flag and its value.
type FlagValue struct{ Flag, Value string }

// daemonKind is the daemon of configFlags a process is looked at as, by
// its comm or its executable's name: only a choice of what to look at;
// package daemon decides whether it is trusted.
func daemonKind(comm, exe string) string {
	if k := daemon.IsKubelet(comm, exe); k != "" {
		return k
	}
	for name := range configFlags {
		if comm == name || exe == name {
			return name
		}
	}
	return ""
}

// runningConfigs are the files the node's daemons name on their command
// lines. Only a daemon the kernel vouches for is read (package daemon:
// root in the node's user namespace, a root-owned executable): a user's
// program calling itself kubelet with --config naming a root-only file
// would otherwise have that file copied into the bundle. Each one refused
// is said in a note, with the check it failed.
func runningConfigs(ctx context.Context, env *collectors.Env) []runningConfig {
	procs, refused := daemon.Find(ctx, env, daemonKind, 0)
	for _, r := range refused {
		env.Notef("%s", r.String())
	}
	var out []runningConfig
	for _, p := range procs {
		ps := strconv.Itoa(p.PID)
		for _, fv := range ConfigPathsFromCmdline(p.Args, configFlags[p.Kind], p.Cwd) {
			out = append(out, runningConfig{Path: fv.Value, Via: hostfs.Path("/proc/" + ps + "/root").Join(fv.Value),
				From: p.Name + " " + fv.Flag + " (pid " + ps + ")"})
		}
	}
	return out
}
