package analyze

import (
	"fmt"
	"strings"

	"github.com/nodesnap/nodesnap/bundle/layout"
)

// Mounts whose probe could not run: what the bundle holds instead (kernel stacks in that filesystem's code, the kubelet's threads).

// notProbed reports mounts the probe did not reach before its deadline,
// with what the bundle already shows about them: tasks sleeping in their
// filesystem's code (the kubelet's among them for a pod volume), and
// dirshape's timeout on the same path. Without such evidence they are
// listed together as unknown.
func (st *state) notProbed(own, used map[int]bool) {
	var unknown []string
	var unknownRecs []layout.MountProbe
	for _, ps := range st.probesByDevice(func(p layout.MountProbe) bool { return p.Result == layout.ProbeUnfinished }) {
		p0 := ps[0]
		mps := probeMountpoints(ps)
		markers := fsMarkers(p0.FSType, p0.Class)
		kubeletPath := false
		for _, mp := range mps {
			kubeletPath = kubeletPath || strings.Contains(mp, "/kubelet/") || strings.Contains(mp, "/volumes/kubernetes.io~")
		}
		holders := map[int]bool{}
		for _, p := range ps {
			for _, ns := range p.Namespaces {
				if h := st.mountHolders[nsMount{ns, p.MountID}]; h != nil {
					for _, fh := range h.Holders {
						holders[fh.PID] = true
					}
				}
			}
		}
		var direct, sameKind []layout.Task
		if len(markers) > 0 {
			for i := range st.tasks {
				t := &st.tasks[i]
				if own[t.TID] || own[t.PID] || fuseServer(t) || !taskOn(t, markers) {
					continue
				}
				d := holders[t.PID] || (kubeletPath && st.isKubeletTask(t))
				if pr := st.procs[t.PID]; pr != nil && pr.Cmdline != "" {
					for _, mp := range mps {
						d = d || tokenIn(pr.Cmdline, mp)
					}
				}
				if d {
					direct = append(direct, *t)
					used[t.TID] = true
				} else if !used[t.TID] {
					sameKind = append(sameKind, *t)
				}
			}
		}
		var shape []layout.DirShapeRoot
		if st.shape != nil {
			// dirshape names host paths; a probe in nodesnap's own
			// namespace names them with the --root prefix.
			hostMps := append([]string{}, mps...)
			for _, mp := range mps {
				if h, ok := st.unroot(mp); ok {
					hostMps = append(hostMps, h)
				}
			}
			for _, r := range st.shape.Roots {
				if r.Status != layout.DirShapeHung {
					continue
				}
				for _, mp := range hostMps {
					if r.Path == mp || strings.HasPrefix(r.Path, mp+"/") || r.Mountpoint == mp {
						shape = append(shape, r)
						break
					}
				}
			}
		}
		if len(direct) == 0 && len(shape) == 0 && len(sameKind) == 0 {
			unknown = append(unknown, mps...)
			unknownRecs = append(unknownRecs, ps...)
			continue
		}
		kind := p0.FSType
		f := Finding{ID: idNotProbed, Severity: Warning, Title: "Mount not probed, and the bundle shows processes waiting on its kind of filesystem", Subject: p0.Dev}
		var why []string
		if len(shape) > 0 {
			why = append(why, "dirshape's scan of "+shape[0].Path+" did not answer either")
		}
		if len(direct) > 0 {
			why = append(why, fmt.Sprintf("%s in %s code on it", plural(len(direct), "task sleeps", "tasks sleep"), kind))
		}
		if len(direct) > 0 || len(shape) > 0 {
			f.Severity = Critical
			f.Title = "Mount not probed, but the bundle shows it hangs"
		} else {
			why = append(why, fmt.Sprintf("%s in %s code, on this or another mount of its kind", plural(len(sameKind), "task sleeps", "tasks sleep"), kind))
		}
		f.Summary = fmt.Sprintf("%s mount %s was not probed (mountprobe's deadline came first), but %s", kind, listOf(mps, 2), strings.Join(why, " and "))
		if pods := st.podsOfPaths(mps); pods != "" {
			f.Summary += "; " + pods
		}
		var kubeletTasks []layout.Task
		for i := range direct {
			if st.isKubeletTask(&direct[i]) {
				kubeletTasks = append(kubeletTasks, direct[i])
			}
		}
		var kw kubeletWait
		if len(st.stuckCleanup()) == 0 {
			kw = st.kubeletWaitIn(mps, kubeletTasks)
		}
		f.Summary += kw.summary
		if kw.housekeeping {
			f.Impact = ImpactSyncLoop
		}
		var b strings.Builder
		fmt.Fprintf(&b, "mountprobe ran out of time before it reached %s (device %s, from %s): its state was not measured. ", listOf(mps, 4), orUnknown(p0.Dev), orUnknown(p0.Source))
		if len(shape) > 0 {
			fmt.Fprintf(&b, "dirshape, which stats the same path in a worker with a deadline, got no answer: %s. ", orUnknown(shape[0].Error))
		}
		if len(direct) > 0 {
			fmt.Fprintf(&b, "Tasks sleeping in %s code on it: %s. ", kind, listOf(taskNames(direct), 6))
			if kw.explanation != "" {
				b.WriteString(kw.explanation + " ")
			} else if kubeletPath && len(kubeletTasks) > 0 {
				b.WriteString("A kubelet thread waiting on a pod volume path is the kubelet's housekeeping (cleanupOrphanedPodDirs) stuck on it, as its goroutine dump shows: the sync loop stops and new pods stay Pending (incident 003). ")
			}
		}
		if len(sameKind) > 0 {
			fmt.Fprintf(&b, "Tasks sleeping in %s code, on this or another mount of its kind: %s. ", kind, listOf(taskNames(sameKind), 6))
		}
		b.WriteString("Collect again with more time for mountprobe (--timeout 5m --collector-timeout 3m) or with the mount probed first (--mountprobe-first PATH) to measure it.")
		f.Explanation = b.String()
		for _, p := range ps {
			f.Evidence = append(f.Evidence, Evidence{Path: layout.ProbesPath, What: "the mount the probe did not reach", Record: p})
		}
		if len(shape) > 0 {
			f.Evidence = append(f.Evidence, Evidence{Path: layout.ShapePath, What: "dirshape's scan of the same path did not answer", Record: shape})
		}
		if len(direct) > 0 {
			f.Evidence = append(f.Evidence, Evidence{Path: layout.TasksPath, What: "tasks sleeping in the filesystem's code on this mount (kernel stack or wait channel)", Record: direct})
		}
		if len(sameKind) > 0 {
			f.Evidence = append(f.Evidence, Evidence{Path: layout.TasksPath, What: "tasks sleeping in the same filesystem's code, on this or another mount of its kind", Record: sameKind})
		}
		fuse := strings.HasPrefix(p0.FSType, "fuse") || p0.Class == "fuse"
		for _, mp := range mps {
			if fuse {
				f.Remediation = append(f.Remediation, fuseFixes(ps, mp)...)
			} else {
				q := shellQuote(mp)
				f.Remediation = append(f.Remediation, "If it hangs (stat "+q+" from a shell you can lose), force-unmount it: umount -f "+q+"   and if it is still busy: umount -l "+q)
			}
		}
		st.add(f)
	}
	if len(unknown) > 0 {
		st.add(Finding{
			ID: idNotProbed, Severity: Info, Title: "Mounts not probed", Subject: "mountprobe",
			Summary: fmt.Sprintf("%s not probed before mountprobe's deadline: %s", plural(len(unknown), "mount was", "mounts were"), listOf(unknown, 3)),
			Explanation: "mountprobe ran out of time before it reached these mounts, usually because many others hung first; nothing else in the bundle " +
				"(tasks in their filesystems' code, dirshape) says they hang, but their state is unknown.",
			Evidence:    []Evidence{{Path: layout.ProbesPath, What: "the mounts the probe did not reach", Record: unknownRecs}},
			Remediation: []string{"If these mounts matter, collect again with more time for mountprobe (--timeout 5m --collector-timeout 3m) or with them probed first (--mountprobe-first PATH)."},
		})
	}
}

// classOfPath guesses a path's filesystem class from the mount table.
func (st *state) classOfPath(p string) string {
	best := ""
	class := ""
	for _, m := range st.mounts {
		if m.Host && strings.HasPrefix(p, m.MountPoint) && len(m.MountPoint) > len(best) {
			best, class = m.MountPoint, m.Class
		}
	}
	return class
}
