package events

import "strings"

// A node plugin checks its volumes' mount paths (stat, statfs, df, du,
// NodeGetVolumeStats); a check that times out is its view of a hung
// mount, whatever the driver's wording around it. A provisioner or a
// plugin creates a volume's directory (mkdir, MkdirAll); one that fails
// with an errno is the volume's provisioning failing.

var (
	// reCheckPath is a check's verb and the path it checked ("stat
	// /x: ...", "stat mntPath: /x err: ...", "statfs(/x)", "df -h /x").
	reCheckPath = lazy(`(?i)\b(?:l?stat|statfs|fstatat|statvfs|df|du)\b[^/\n]{0,40}?(/[^\s"',;:()\[\]]+)`)
	// reMkdirPath is a directory's creation and its path, as mkdir(1)
	// (GNU's and busybox's), Go's *os.PathError and drivers word it.
	reMkdirPath = lazy(`(?i)\b(?:mkdir(?:all)?|(?:create|creating|make|making) (?:the )?(?:volume )?(?:dir|directory|folder))\b[^/\n]{0,40}?(/[^\s"',;:()\[\]]+)`)
)

// timedOut tells a record whose error is a deadline's or a timeout's.
func timedOut(lower string) bool {
	return containsAny(lower, "deadline exceeded", "deadlineexceeded", "deadline_exceeded", "i/o timeout", "timed out", "timeout")
}

// checkPath is the mount path a timed-out check names, and whether the
// record is one: a stat-like call or NodeGetVolumeStats, a deadline or
// timeout, and a path that is a volume's or a driver's mount (not a
// device, a socket or the kernel's pseudo files).
func checkPath(text, lower, method string) (string, bool) {
	if !timedOut(lower) || !containsAny(lower, "stat", "df", "du") {
		return "", false
	}
	path := ""
	if m := reCheckPath.FindStringSubmatch(text); m != nil {
		path = strings.TrimRight(m[1], ".")
	}
	stats := method == "NodeGetVolumeStats" || strings.Contains(lower, "volumestats") || strings.Contains(lower, "volume stats")
	if path == "" {
		return "", stats
	}
	if !mountLikePath(path) {
		return "", false
	}
	return path, true
}

// mountLikePath tells a path that can be a volume's mount: absolute,
// two segments deep at least, not under /dev, /proc or /sys, not a
// socket.
func mountLikePath(p string) bool {
	if !strings.HasPrefix(p, "/") || strings.Count(strings.TrimRight(p, "/"), "/") < 2 {
		return false
	}
	for _, pre := range []string{"/dev/", "/proc/", "/sys/"} {
		if strings.HasPrefix(p, pre) {
			return false
		}
	}
	return !strings.HasSuffix(p, ".sock")
}

// mkdirPath is the volume directory a failed creation names: a path
// holding a PV's name (pvc-<uuid>, whatever is joined after it) or under
// the kubelet's pods or plugins directories.
func mkdirPath(text, lower string) (string, bool) {
	if !containsAny(lower, "mkdir", "dir", "folder") || errnoOf(lower) == "" {
		return "", false
	}
	m := reMkdirPath.FindStringSubmatch(text)
	if m == nil {
		return "", false
	}
	p := strings.TrimRight(m[1], ".")
	if !rePV.MatchString(p) && !strings.Contains(p, "/volumes/") && !strings.Contains(p, "/plugins/") && !strings.Contains(p, "/volume-subpaths/") {
		return "", false
	}
	return p, true
}
