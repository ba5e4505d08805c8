package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/read/analyze"
	"github.com/nodesnap/nodesnap/test/testkit"
)

// nodesnap in a pod runs in a mount namespace of its own, a copy of the
// node's mounts. Here its supervisor runs in a private mount namespace
// holding an ext4 that the host does not mount, beside a real foreign
// holder (a process in another private namespace keeping a copy of an
// ext4 the host has unmounted, incident 002). The bundle must record
// nodesnap's namespace and processes, not count them as a holder, say so,
// and still flag the real one.
func TestCollectOwnNamespaceNotEvidence(t *testing.T) {
	binaryTest(t)
	testkit.RequireRoot(t)
	testkit.RequireTool(t, "unshare")
	testkit.RequireTool(t, "mount")
	testkit.RequireTool(t, "sh")

	foreign := testkit.LoopExt4(t, 16)
	holder := testkit.HoldInPrivateNamespace(t, foreign.Mountpoint)
	if err := unix.Unmount(foreign.Mountpoint, 0); err != nil {
		t.Fatalf("unmount %s on the host: %v", foreign.Mountpoint, err)
	}
	// Mounted only inside nodesnap's own namespace, which goes away with
	// nodesnap's processes (before the device is detached on cleanup).
	own := testkit.LoopExt4(t, 16, testkit.LoopNoMount())
	ownMP := t.TempDir()
	out := t.TempDir()

	script := `mount -t ext4 "$1" "$2" && shift 2 && exec "$@"`
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script, "sh", own.Device, ownMP,
		os.Args[0], "collect", "--output-dir", out, "--only", "processes,mounts,openfiles", "--timeout", "90s", "--output", "json")
	cmd.Env = append(os.Environ(), "NODESNAP_TEST_AS_MAIN=1", collectors.PodUIDEnv+"=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		t.Fatalf("collect in a private namespace did not finish\n%s", stderr.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != exitOK && code != exitPartial {
		t.Fatalf("collect: exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	var res collectResult
	if err := json.Unmarshal([]byte(stdout.String()), &res); err != nil {
		t.Fatalf("collect output %q: %v", stdout.String(), err)
	}
	c := mustValidate(t, res.Path)

	hostNS, err := testkit.MountNamespace(0)
	if err != nil {
		t.Fatal(err)
	}
	self := c.Manifest.Self
	if self == nil || self.MountNamespace == 0 || self.MountNamespace == hostNS || self.MountNamespace == holder.NSInode {
		t.Fatalf("manifest self %+v: want nodesnap's own private namespace (host %d, holder %d)", self, hostNS, holder.NSInode)
	}
	var rep layout.MountsReport
	if err := json.Unmarshal(c.Files["mounts/mounts.json"], &rep); err != nil {
		t.Fatal(err)
	}
	if err := layout.ExpandMountTables(&rep); err != nil {
		t.Fatal(err)
	}
	ns := rep.Nodesnap
	if ns == nil || ns.MountNamespace != self.MountNamespace || !slices.Equal(ns.Namespaces, []uint64{self.MountNamespace}) {
		t.Fatalf("mounts.json nodesnap block %+v, want namespace %d", ns, self.MountNamespace)
	}
	// The supervisor and its collector children: with the host's PID
	// namespace, the pids are the manifest's.
	if ns.SupervisorPID != self.PID || !slices.Contains(ns.PIDs, self.PID) || len(ns.PIDs) < 2 {
		t.Errorf("nodesnap's processes %v (supervisor %d), want the supervisor %d and its collectors", ns.PIDs, ns.SupervisorPID, self.PID)
	}
	if slices.Contains(ns.PIDs, holder.Pid) {
		t.Errorf("the holder %d is counted among nodesnap's processes %v", holder.Pid, ns.PIDs)
	}
	for _, n := range rep.Namespaces {
		want := ""
		if n.Inode == self.MountNamespace {
			want = layout.NodesnapOwn
		}
		if n.Nodesnap != want {
			t.Errorf("namespace %d marked %q, want %q", n.Inode, n.Nodesnap, want)
		}
	}
	ownDev, foreignDev := fmt.Sprintf("%d:%d", own.Major, own.Minor), fmt.Sprintf("%d:%d", foreign.Major, foreign.Minor)
	seen := 0
	for _, d := range rep.Devices {
		switch d.Dev {
		case ownDev:
			seen++
			if d.OnlyOutsideHostNamespace || !d.OnlyInNodesnapNamespaces || len(d.Namespaces) != 1 || d.Namespaces[0].Nodesnap != layout.NodesnapOwn {
				t.Errorf("nodesnap's own mount counted as held outside the host: %+v", d)
			}
		case foreignDev:
			seen++
			if !d.OnlyOutsideHostNamespace || d.OnlyInNodesnapNamespaces || len(d.Namespaces) != 1 || d.Namespaces[0].Namespace != holder.NSInode || d.Namespaces[0].Nodesnap != "" {
				t.Errorf("the real foreign holder is not flagged: %+v", d)
			}
		}
	}
	if seen != 2 || !slices.Contains(ns.ExcludedDevices, ownDev) || slices.Contains(ns.ExcludedDevices, foreignDev) {
		t.Errorf("devices seen %d of 2; excluded %v (want %s, not %s)", seen, ns.ExcludedDevices, ownDev, foreignDev)
	}
	notes := strings.Join(collectorByName(t, c.Manifest, "mounts").Notes, "\n")
	if !strings.Contains(notes, fmt.Sprintf("nodesnap's own mount namespace %d", self.MountNamespace)) || !strings.Contains(notes, "not counted as holders") {
		t.Errorf("the mounts collector does not say what it left out:\n%s", notes)
	}
	if strings.Contains(notes, ownDev) {
		t.Errorf("the mounts collector notes nodesnap's own mount as held outside the host:\n%s", notes)
	}

	insp := runNodesnap(t, 30*time.Second, nil, "inspect", res.Path)
	if want := fmt.Sprintf("nodesnap:  pid %d, mount namespace %d\n", self.PID, self.MountNamespace); !strings.Contains(insp.stdout, want) {
		t.Errorf("inspect does not say who nodesnap was (%q):\n%s", want, insp.stdout)
	}

	r, err := analyze.AnalyzeFile(context.Background(), res.Path, analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var held, excluded []analyze.Finding
	for _, f := range r.Findings {
		switch f.ID {
		case "mount-held-in-foreign-namespace":
			held = append(held, f)
			if strings.Contains(f.Summary+f.Explanation, fmt.Sprint(self.MountNamespace)) {
				t.Errorf("a finding names nodesnap's own namespace as a holder: %s", f.Summary)
			}
		case "nodesnap-own-namespace-excluded":
			excluded = append(excluded, f)
		}
	}
	foundForeign := false
	for _, f := range held {
		if f.Subject == ownDev {
			t.Errorf("nodesnap's own mount flagged: %s", f.Summary)
		}
		foundForeign = foundForeign || f.Subject == foreignDev && strings.Contains(f.Summary, fmt.Sprint(holder.NSInode))
	}
	if !foundForeign {
		t.Errorf("the real foreign holder (namespace %d) is not flagged; findings: %+v", holder.NSInode, held)
	}
	if len(excluded) != 1 || excluded[0].Severity != analyze.Info ||
		!strings.Contains(excluded[0].Summary, fmt.Sprintf("own mount namespace %d", self.MountNamespace)) {
		t.Fatalf("analyze does not say it left nodesnap's namespace out: %+v", excluded)
	}
	b, _ := json.Marshal(excluded[0].Evidence)
	if !strings.Contains(string(b), `"`+ownDev+`"`) {
		t.Errorf("the exclusion's evidence does not list %s: %s", ownDev, b)
	}
	if _, err := os.Stat(filepath.Join(ownMP, "lost+found")); err == nil {
		t.Errorf("the ext4 mounted in nodesnap's namespace leaked into the test's")
	}
}
