package analyze

import (
	"fmt"
	"sort"
	"strings"
)

// Incident 001: dockerd's goroutine dump showed one goroutine in
// volume/local.(*Root).Remove → os.RemoveAll → syscall.unlinkat for hours
// (the volume held 5 million empty directories) while holding the volume
// driver's mutex, and many more in semacquire under (*Root).Get and
// (*Daemon).ContainerCreate: every container create and delete on the node
// waited behind it.

const idRuntimeLock = "runtime-volume-removal-blocking"

// What each finding of this file means, for docs/findings.md.
var _ = document(
	RuleDoc{
		ID: "runtime-volume-removal-blocking", Severity: "warning or critical",
		Title:    "A runtime goroutine removing a volume blocks the others",
		Meaning:  "The container runtime's goroutine dump shows one goroutine in `os.RemoveAll` of a volume for a long time while holding the volume driver's lock, and others waiting on that lock: every container create and delete on the node waits behind it (a volume with millions of entries).",
		Evidence: "`runtime/goroutine*.txt`: the remover and the waiters, with how long they have waited.",
		Fix:      "Let the removal finish, or restart the runtime and empty the directory in the background first (see huge-directory).",
		Incident: "incident 001",
	},
)

func ruleRuntimeLock(st *state, huge []string) {
	for _, d := range st.runtimeDump {
		var removers []goroutine
		for _, g := range d.Kept {
			if (g.has("os.RemoveAll") || g.has("removeAllFrom") || g.has("unlinkat") || g.has("Unlinkat")) && g.State != "" {
				removers = append(removers, g)
			}
		}
		if len(removers) == 0 {
			continue
		}
		sort.SliceStable(removers, func(i, j int) bool {
			if removers[i].Minutes != removers[j].Minutes {
				return removers[i].Minutes > removers[j].Minutes
			}
			return removalDepth(removers[i]) > removalDepth(removers[j])
		})
		longest := removers[0].Minutes
		// Who waits for a lock in the same code: keys mentioning volume
		// management, or any lock wait when the remover is in it.
		var waitKeys []string
		waiting := 0
		for k, n := range d.Waiters {
			if strings.Contains(strings.ToLower(k), "volume") || strings.Contains(k, "ContainerCreate") || strings.Contains(k, "(*Daemon).") {
				waitKeys = append(waitKeys, k)
				waiting += n
			}
		}
		sort.Strings(waitKeys)
		// A dump taken early, or by a runtime whose dump prints no wait
		// times, shows the remover in [syscall] without minutes: a deep
		// recursive removal in unlinkat is still the incident, named with
		// less confidence.
		deep := removers[0].State == "syscall" && removalDepth(removers[0]) >= minRemovalDepth
		if longest < 1 && waiting == 0 && !deep {
			continue
		}
		sev := Warning
		if waiting > 0 && longest >= 1 {
			sev = Critical
		}
		runtimeName := runtimeOfPath(d.Path)
		summary := fmt.Sprintf("%s has been removing a directory for %d minutes (%s); %s waiting for a lock in its volume code",
			runtimeName, longest, removers[0].describe(), plural(waiting, "goroutine is", "goroutines are"))
		if longest < 1 {
			summary = fmt.Sprintf("%s is removing a directory tree %d levels deep in unlinkat (%s; the dump gives no duration); %s waiting for a lock in its volume code",
				runtimeName, removalDepth(removers[0]), removers[0].describe(), plural(waiting, "goroutine is", "goroutines are"))
		}
		f := Finding{
			ID:       idRuntimeLock,
			Severity: sev,
			Title:    "Container runtime stuck removing a volume, blocking others",
			Subject:  d.Path,
			Summary:  summary,
			Explanation: "The runtime's goroutine dump shows a recursive removal (os.RemoveAll → unlinkat) running for a long time, and other goroutines blocked on a lock in the " +
				"runtime's volume code (" + listOf(waitKeys, 3) + "). When the removal holds the volume driver's lock, every container create and delete on the node waits behind it: " +
				"pods stay Terminating and new containers stay Created (incident 001, where a Docker volume held 5 million empty directories). " +
				"A huge directory in the runtime's tree (see huge-directory / ext4-nlink-overflow) is what takes so long to remove.",
		}
		f.Evidence = append(f.Evidence, goroutineEvidence(removers, "the goroutine removing a directory, and for how long")...)
		var samples []goroutine
		for _, k := range waitKeys {
			samples = append(samples, d.WaiterSample[k])
		}
		f.Evidence = append(f.Evidence, goroutineEvidence(samples, "goroutines waiting for the lock it holds")...)
		for _, h := range huge {
			f.Explanation += " Huge directory in this bundle: " + h + "."
		}
		f.Remediation = []string{
			"Let the removal finish if it is close (watch the directory's entry count fall), or restart the runtime to release the lock (systemctl restart " + runtimeName + "); the volume directory is then left to delete.",
			"Delete the huge directory in the background, outside the runtime: ionice -c3 find <dir> -mindepth 1 -delete",
			"Stop the workload that leaked the entries; avoid Docker VOLUMEs for data a container writes heavily (use a Kubernetes volume).",
		}
		st.add(f)
	}
}

// minRemovalDepth is how many nested os.RemoveAll frames make a removal
// worth naming without a wait time: a tree, not a file.
const minRemovalDepth = 4

// removalDepth counts a goroutine's recursive removal frames.
func removalDepth(g goroutine) int {
	n := 0
	for _, f := range g.Frames {
		if strings.HasPrefix(f, "os.RemoveAll") || strings.HasPrefix(f, "os.removeAllFrom") || strings.HasSuffix(f, ".removeAllFrom") {
			n++
		}
	}
	return n
}

// runtimeOfPath names the runtime of a dump by its bundle path
// (runtime/docker/goroutine-debug2.txt, or a log: journal/containerd.log).
func runtimeOfPath(p string) string {
	parts := strings.Split(p, "/")
	if len(parts) < 2 {
		return "the container runtime"
	}
	name := strings.TrimSuffix(parts[1], ".log")
	if strings.Contains(name, ".") {
		return "the container runtime"
	}
	return name
}
