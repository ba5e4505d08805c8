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

func ruleRuntimeLock(st *state) {
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
		sort.SliceStable(removers, func(i, j int) bool { return removers[i].Minutes > removers[j].Minutes })
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
		if longest < 1 && waiting == 0 {
			continue
		}
		sev := Warning
		if waiting > 0 && longest >= 1 {
			sev = Critical
		}
		runtimeName := "the container runtime"
		if parts := strings.Split(d.Path, "/"); len(parts) >= 2 {
			runtimeName = parts[1]
		}
		f := Finding{
			ID:       idRuntimeLock,
			Severity: sev,
			Title:    "Container runtime stuck removing a volume, blocking others",
			Subject:  d.Path,
			Summary: fmt.Sprintf("%s has been removing a directory for %d minutes (%s); %s waiting for a lock in its volume code",
				runtimeName, longest, removers[0].describe(), plural(waiting, "goroutine is", "goroutines are")),
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
		for _, h := range st.findings {
			if h.ID == idHugeDir || h.ID == idNlinkOverflow {
				f.Explanation += " Huge directory in this bundle: " + h.Subject + "."
			}
		}
		f.Remediation = []string{
			"Let the removal finish if it is close (watch the directory's entry count fall), or restart the runtime to release the lock (systemctl restart " + runtimeName + "); the volume directory is then left to delete.",
			"Delete the huge directory in the background, outside the runtime: ionice -c3 find <dir> -mindepth 1 -delete",
			"Stop the workload that leaked the entries; avoid Docker VOLUMEs for data a container writes heavily (use a Kubernetes volume).",
		}
		st.add(f)
	}
}
