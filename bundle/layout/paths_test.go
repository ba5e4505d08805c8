package layout_test

import (
	"path"
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/bundle/layout"
)

// TestPathsAgree checks that what the collectors write is what the readers
// match where the readers match a pattern rather than one name.
func TestPathsAgree(t *testing.T) {
	for _, tc := range []struct {
		what, name, pattern string
		ok                  bool
	}{
		{"kubelet goroutine dump (debug=1)", path.Join(layout.DirKubelet, layout.KubeletGoroutineDebug1File), layout.KubeletGoroutinePathPrefix,
			strings.HasPrefix(path.Join(layout.DirKubelet, layout.KubeletGoroutineDebug1File), layout.KubeletGoroutinePathPrefix)},
		{"kubelet goroutine dump (debug=2)", layout.KubeletGoroutineDebug2Path, layout.KubeletGoroutinePathPrefix,
			strings.HasPrefix(layout.KubeletGoroutineDebug2Path, layout.KubeletGoroutinePathPrefix) && strings.HasSuffix(layout.KubeletGoroutineDebug2Path, ".txt")},
		{"kubelet metrics", layout.KubeletMetricsFile, layout.KubeletMetricsPrefix, strings.HasPrefix(layout.KubeletMetricsFile, layout.KubeletMetricsPrefix)},
		{"runtime goroutine dump", layout.RuntimeGoroutineFile, layout.RuntimeGoroutinePrefix,
			strings.HasPrefix(layout.RuntimeGoroutineFile, layout.RuntimeGoroutinePrefix) && strings.HasSuffix(layout.RuntimeGoroutineFile, ".txt")},
		{"raw mountinfo", path.Join(layout.DirMounts, layout.MountinfoFile(4026531840)), layout.MountinfoPath + "*" + layout.MountinfoExt,
			strings.HasPrefix(path.Join(layout.DirMounts, layout.MountinfoFile(4026531840)), layout.MountinfoPath) && strings.HasSuffix(layout.MountinfoFile(4026531840), layout.MountinfoExt)},
		{"raw mount tables", path.Join(layout.DirMounts, layout.MountinfoTablesFile), layout.MountinfoTablesPrefix + "*" + layout.MountinfoTablesExt,
			strings.HasPrefix(path.Join(layout.DirMounts, layout.MountinfoTablesPart(1)), layout.MountinfoTablesPrefix) && strings.HasSuffix(layout.MountinfoTablesPart(1), layout.MountinfoTablesExt) &&
				strings.HasPrefix(path.Join(layout.DirMounts, layout.MountinfoTablesPart(3)), layout.MountinfoTablesPrefix) && strings.HasSuffix(layout.MountinfoTablesPart(3), layout.MountinfoTablesExt)},
		{"CSI pod logs", path.Join(layout.DirCSI, layout.CSIPodLogsDir, "kube-system_csi-0", "x.log"), layout.CSIPodLogsPath,
			strings.HasPrefix(path.Join(layout.DirCSI, layout.CSIPodLogsDir, "kube-system_csi-0", "x.log"), layout.CSIPodLogsPath)},
	} {
		if !tc.ok {
			t.Errorf("%s: the collector writes %q, which readers looking for %q do not find", tc.what, tc.name, tc.pattern)
		}
	}
	if got, want := [2]string{layout.MountinfoTablesPart(1), layout.MountinfoTablesPart(2)}, [2]string{"mountinfo.txt", "mountinfo-2.txt"}; got != want {
		t.Errorf("MountinfoTablesPart(1, 2) = %q, want %q (bundles already written use these names)", got, want)
	}
	if got, want := layout.MountinfoFile(4026531840), "ns/4026531840.mountinfo"; got != want {
		t.Errorf("MountinfoFile(4026531840) = %q, want %q (bundles already written use this name)", got, want)
	}
}
