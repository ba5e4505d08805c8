// Package daemon says which running process is a node daemon nodesnap
// takes a credential or a file path from (the kubelet, the container
// runtimes), by what the kernel says of it, never by the name it gives
// itself. A process's name (comm, argv[0], its executable's base name)
// only picks the processes to look at; one is trusted when
//
//   - it runs as root: real and effective uid 0 in its status, as the
//     kernel maps them into nodesnap's user namespace;
//   - in the node's user namespace: the same one as pid 1 (root in a user
//     namespace an unprivileged user made is no one);
//   - its executable is owned by root and writable by no one else, in
//     directories owned by root and writable by no one else, up to "/"
//     (resolved in the process's own root, inside --root).
//
// Its cgroup's systemd unit is recorded beside, as evidence. A process that
// fails a check is Refused: the collector says which pid failed which
// check, and uses nothing it names. Everything another process's /proc
// holds is read in an isolated worker (its command line takes the
// process's mmap lock), each open inside the --root/--proc boundary.
package daemon

import (
	"context"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"

	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/collectors/hostfs"
	"github.com/nodesnap/nodesnap/internal/inroot"
	"github.com/nodesnap/nodesnap/internal/procfs"
)

// Process is a running daemon the kernel vouches for.
type Process struct {
	PID int
	// Kind is what it was looked for as ("kubelet", "containerd", ...);
	// Name its comm.
	Kind, Name string
	// Args is its command line; for a kubelet inside a wrapper, with the
	// kubelet's flags the wrapper keeps in a file (microk8s's
	// --kubelet-args-file) appended.
	Args []string
	// Cwd is its working directory as the kernel names it ("" unknown);
	// Exe its executable.
	Cwd, Exe string
	// Why says what vouched for it, for a note.
	Why string
}

// Refused is a process that goes by a daemon's name but failed a check.
type Refused struct {
	PID        int
	Kind, Name string
	// Failed is the check it failed, in words.
	Failed string
}

// String is the refusal as a note: the pid, the name, the failed check.
func (r Refused) String() string {
	return fmt.Sprintf("pid %d (%s) calls itself %s but is not trusted: %s; nothing it names is used", r.PID, r.Name, r.Kind, r.Failed)
}

// Want says which daemon a process is looked at as, from its comm and the
// base name of its executable ("" to pass it over).
type Want func(comm, exe string) string

// KubeletNames are the names a kubelet runs under: its own, microk8s's
// kubelite, and the hyperkube of old releases (whose first argument then
// says kubelet).
var KubeletNames = []string{"kubelet", "kubelite", "hyperkube"}

// IsKubelet is the Want of the kubelet.
func IsKubelet(comm, exe string) string {
	for _, n := range KubeletNames {
		if comm == n || exe == n {
			return "kubelet"
		}
	}
	return ""
}

// Kubelets finds the node's kubelets (at most limit, 0 for no limit).
func Kubelets(ctx context.Context, env *collectors.Env, limit int) ([]Process, []Refused) {
	return Find(ctx, env, IsKubelet, limit)
}

// Find looks at every process want names and returns those the kernel
// vouches for (at most limit, 0 for no limit) and those it does not.
func Find(ctx context.Context, env *collectors.Env, want Want, limit int) (found []Process, refused []Refused) {
	pids, err := hostfs.ListPIDs(env.ProcPath())
	if err != nil {
		return nil, nil
	}
	b := inroot.Boundary{Root: env.Root, Proc: env.Proc, Sys: env.Sys}
	var buf [1024]byte
	for _, pid := range pids {
		if ctx.Err() != nil || (limit > 0 && len(found) >= limit) {
			break
		}
		ps := strconv.Itoa(pid)
		// stat and the exe link take no lock of the process: read here
		// (on a tree that is not the kernel's, inside the root).
		st, err := readStat(env.ProcPath(ps, "stat"), buf[:])
		if err != nil || st.IsKernelThread() {
			continue
		}
		exe := ""
		if l, err := b.Readlink(env.ProcPath(ps, "exe")); err == nil {
			exe = path.Base(strings.TrimSuffix(l, " (deleted)"))
		}
		kind := want(st.Comm, exe)
		if kind == "" {
			continue
		}
		var f Facts
		if err := env.Host().Do(ctx, 0, OpFacts, hostfs.Path("/proc/"+ps), FactsRequest{Proc: env.ProcPath(), PID: pid}, &f); err != nil {
			refused = append(refused, Refused{PID: pid, Kind: kind, Name: st.Comm, Failed: "what the kernel says of it cannot be read: " + err.Error()})
			continue
		}
		if kind == "kubelet" && (st.Comm == "hyperkube" || exe == "hyperkube") && (len(f.Args) < 2 || path.Base(f.Args[1]) != "kubelet") {
			continue // hyperkube running another component
		}
		why, failed := Judge(f)
		if failed != "" {
			refused = append(refused, Refused{PID: pid, Kind: kind, Name: st.Comm, Failed: failed})
			continue
		}
		p := Process{PID: pid, Kind: kind, Name: st.Comm, Args: f.Args, Cwd: f.Cwd, Exe: f.Exe, Why: fmt.Sprintf("pid %d (%s) is trusted: %s", pid, st.Comm, why)}
		if kind == "kubelet" {
			p.Args = append(p.Args, argsFile(ctx, env, p)...)
		}
		found = append(found, p)
	}
	return found, refused
}

// readStat reads a process's stat with hostfs's fast reader: a plain
// open on the kernel's procfs, inside the root on any other tree.
func readStat(seen string, buf []byte) (procfs.Stat, error) {
	b, err := hostfs.ReadSmall(seen, buf)
	if err != nil {
		return procfs.Stat{}, err
	}
	return procfs.ParseStat(b)
}

// Judge decides from a process's facts whether the kernel vouches for it:
// what vouched (why) or the first check it failed (failed).
func Judge(f Facts) (why, failed string) {
	switch {
	case f.StatusErr != "":
		return "", "its status cannot be read (" + f.StatusErr + ")"
	case f.UID.Real != 0 || f.UID.Effective != 0:
		return "", fmt.Sprintf("it runs as uid %d (effective %d), not root", f.UID.Real, f.UID.Effective)
	case f.UserNS == "":
		return "", "its user namespace cannot be read"
	case f.InitUserNS == "":
		return "", "the node's user namespace cannot be read (neither pid 1's nor nodesnap's own), so its own cannot be compared with it"
	case f.UserNS != f.InitUserNS:
		ref := f.NSRef
		if ref == "" {
			ref = "pid 1's"
		}
		return "", fmt.Sprintf("it runs in a user namespace (%s) other than %s (%s): its root is not the node's", f.UserNS, ref, f.InitUserNS)
	case f.Exe == "":
		return "", "its executable cannot be read (" + f.ExeErr + ")"
	}
	files := append([]FileFacts{{Path: f.Exe, UID: f.ExeUID, GID: f.ExeGID, Mode: f.ExeMode, Err: f.ExeErr}}, f.Dirs...)
	for i, ff := range files {
		what := "its executable " + f.Exe
		if i > 0 {
			what = "the directory " + ff.Path + " of its executable"
		}
		switch {
		case ff.Err != "":
			return "", what + " cannot be checked (" + ff.Err + ")"
		case ff.UID != 0:
			return "", fmt.Sprintf("%s is owned by uid %d, not root", what, ff.UID)
		case ff.Mode&0o002 != 0, ff.Mode&0o020 != 0 && ff.GID != 0:
			return "", fmt.Sprintf("%s is writable by users other than root (mode %04o)", what, ff.Mode&0o7777)
		}
	}
	why = "uid 0 in the node's user namespace, its executable " + f.Exe + " owned by root and writable by no one else"
	if f.Unit != "" {
		why += ", in " + f.Unit
	}
	return why, ""
}

// argsFile is what a kubelet inside a wrapper keeps its flags in: the
// file microk8s's kubelite names with --kubelet-args-file, one flag per
// line, read in the kubelet's own root. It is read only for a process
// already trusted.
func argsFile(ctx context.Context, env *collectors.Env, p Process) []string {
	var file string
	for i := 1; i < len(p.Args); i++ {
		if v, ok := strings.CutPrefix(p.Args[i], "--kubelet-args-file="); ok {
			file = v
		} else if p.Args[i] == "--kubelet-args-file" && i+1 < len(p.Args) {
			file = p.Args[i+1]
		}
	}
	if !path.IsAbs(file) {
		return nil
	}
	r, err := env.Host().Read(ctx, hostfs.Path("/proc/"+strconv.Itoa(p.PID)+"/root").Join(file), 64<<10)
	if err != nil {
		env.Notef("reading the kubelet's arguments file %s (pid %d): %v", file, p.PID, err)
		return nil
	}
	return snapPaths(ParseArgsFile(string(r.Data)), p.Exe)
}

// snapPaths expands the snap variables an arguments file of a snap
// (microk8s) writes its paths with, as snapd sets them for the process
// whose executable is /snap/<name>/<revision>/...: $SNAP, $SNAP_DATA
// (/var/snap/<name>/<revision>) and $SNAP_COMMON (/var/snap/<name>/common).
// Nothing is read from the process's environment.
func snapPaths(args []string, exe string) []string {
	parts := strings.Split(strings.TrimPrefix(exe, "/"), "/")
	if len(parts) < 3 || parts[0] != "snap" || parts[1] == "" || parts[2] == "" {
		return args
	}
	name, rev := parts[1], parts[2]
	vars := map[string]string{
		"SNAP":        "/snap/" + name + "/" + rev,
		"SNAP_DATA":   "/var/snap/" + name + "/" + rev,
		"SNAP_COMMON": "/var/snap/" + name + "/common",
	}
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = os.Expand(a, func(k string) string {
			if v, ok := vars[k]; ok {
				return v
			}
			return "${" + k + "}"
		})
	}
	return out
}

// ParseArgsFile splits an arguments file (microk8s's args/kubelet): one
// flag per line, "--flag=value" or "--flag value", '#' comments, values
// maybe quoted.
func ParseArgsFile(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") || !strings.HasPrefix(l, "-") {
			continue
		}
		flag, val, hasVal := strings.Cut(l, "=")
		if !hasVal {
			flag, val, hasVal = strings.Cut(l, " ")
		}
		flag = strings.TrimSpace(flag)
		if !hasVal {
			out = append(out, flag)
			continue
		}
		val = strings.TrimSpace(val)
		if len(val) >= 2 && (val[0] == '"' || val[0] == '\'') && val[len(val)-1] == val[0] {
			val = val[1 : len(val)-1]
		}
		out = append(out, flag+"="+val)
	}
	return out
}
