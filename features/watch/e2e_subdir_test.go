package watch

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/test/testkit"
)

// A directory of the kubelet's tree past ext4's subdirectory link limit
// (incident 001's anomaly: with dir_nlink, past 64,998 subdirectories its
// st_nlink stays 1), on a real ext4 filesystem of a loop device: one
// bundle naming the directory. About 15 s on 2 cores (3.5 s of them to
// make the directories), so it runs with the others.
func TestWatchSubdirLimit(t *testing.T) {
	testkit.RequireLoop(t)
	const n = 65000
	l := testkit.LoopExt4(t, 128, testkit.LoopInodes(n+2000))
	big := filepath.Join(l.Mountpoint, "pods", "0b8f0f0c-uid", "volumes", "kubernetes.io~empty-dir")
	if err := os.MkdirAll(big, 0o755); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	testkit.ManySubdirs(t, big, n)
	t.Logf("made %d directories in %v", n, time.Since(start))
	var st unix.Stat_t
	if err := unix.Stat(big, &st); err != nil {
		t.Fatal(err)
	}
	if st.Nlink != 1 {
		t.Fatalf("%s has %d subdirectories and st_nlink %d: the filesystem does not show ext4's dir_nlink anomaly", big, n, st.Nlink)
	}
	config := strings.Replace(quickConfig, "dirs: {interval: 1s}", fmt.Sprintf("dirs: {interval: 1s, kubelet_root: %q}", l.Mountpoint), 1)
	w := startWatcher(t, config, "--triggers", TriggerSubdirLimit)
	m := w.waitBundle(t, 60*time.Second)
	wantEvidence(t, m, TriggerSubdirLimit, big)
}
