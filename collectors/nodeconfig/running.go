package nodeconfig

import (
	"context"
	"os"
	"path"
	"strconv"
	"strings"

	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/collectors/hostfs"
	"github.com/nodesnap/nodesnap/internal/procfs"
)

// The configuration a node's daemons actually run with is named on their
// command lines (kubelet --config and --kubeconfig, containerd --config):
// a fixed list of paths finds the defaults, and on a real node collected a
// containerd config the running containerd did not use. runningConfigs
// reads the command lines of the kubelet and the runtimes (each through an
// isolated worker: /proc/<pid>/cmdline takes the process's mmap lock) and
// returns the files they name, read through /proc/<pid>/root so the path
// resolves in the daemon's own mount namespace.

// configFlags are the flags of each daemon whose value is a file to
// collect.
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

func runningConfigs(ctx context.Context, env *collectors.Env) []runningConfig {
	pids, err := hostfs.ListPIDs(env.ProcPath())
	if err != nil {
		return nil
	}
	var out []runningConfig
	for _, pid := range pids {
		if ctx.Err() != nil {
			break
		}
		ps := strconv.Itoa(pid)
		// comm and stat take no lock of the process: read here, as the
		// processes collector does.
		b, err := os.ReadFile(env.ProcPath(ps, "stat"))
		if err != nil {
			continue
		}
		st, err := procfs.ParseStat(b)
		if err != nil || st.IsKernelThread() {
			continue
		}
		flags, ok := configFlags[st.Comm]
		if !ok {
			continue
		}
		res, err := env.Host().Read(ctx, hostfs.Path("/proc/"+ps+"/cmdline"), 128<<10)
		if err != nil {
			env.Notef("reading %s's command line (pid %d): %v", st.Comm, pid, err)
			continue
		}
		cwd := ""
		if l, err := os.Readlink(env.ProcPath(ps, "cwd")); err == nil && path.IsAbs(l) {
			cwd = l
		}
		for _, fv := range ConfigPathsFromCmdline(procfs.ParseCmdline(res.Data), flags, cwd) {
			out = append(out, runningConfig{Path: fv.Value, Via: hostfs.Path("/proc/" + ps + "/root").Join(fv.Value),
				From: st.Comm + " " + fv.Flag + " (pid " + ps + ")"})
		}
	}
	return out
}
