package analyze_test

import (
	"strings"
	"testing"
)

// TestUnmountFindingDoesNotHideMountFailure: a node plugin's cleanup
// unmount of a path fails, then its mount of a share on that path fails
// for a reason of its own. The unmount's finding names the path; the
// mount's failure, the other side of the path's life and the likelier
// cause, must still be a finding of its own.
func TestUnmountFindingDoesNotHideMountFailure(t *testing.T) {
	unmount := []string{
		"2024/01/02 03:04:05 cleanup error: unmount failed: exit status 1",
		"Unmounting arguments: /srv/plugin/mnt/share7",
		"Output: umount: /srv/plugin/mnt/share7: not mounted.",
	}
	mount := []string{
		"E0102 03:04:06.123456       1 mount_linux.go:219] Mount failed: exit status 32",
		"Mounting command: mount",
		"Mounting arguments: -t glusterfs gl-server:/share7 /srv/plugin/mnt/share7",
		"Output: mount: /srv/plugin/mnt/share7: unknown filesystem type 'glusterfs'.",
	}
	// mountFinding: the finding of the mount's failure, if any: the
	// operation named as the logs say it ("mount of path … fails").
	mountFinding := func(lines []string) (ids, found string) {
		rep := analyzeLinesOf(t, "gluster-plugin", lines...)
		var a []string
		for _, f := range rep.Findings {
			a = append(a, f.ID)
			if f.ID != "unmount-failed" && strings.Contains(f.Summary, "mount of ") && !strings.Contains(f.Summary, "unmount of ") &&
				strings.Contains(f.Subject+f.Summary, "/srv/plugin/mnt/share7") {
				found = f.ID + ": " + f.Summary
			}
		}
		return strings.Join(a, " "), found
	}
	if ids, found := mountFinding(append(append([]string{}, unmount...), mount...)); found == "" {
		t.Errorf("unmount then mount failing: no finding of the mount's failure (findings %s)", ids)
	}
	// The unmount alone has no mount side to tell.
	if ids, found := mountFinding(unmount); found != "" {
		t.Errorf("unmount failing alone: a mount failure found (findings %s): %s", ids, found)
	}
}
