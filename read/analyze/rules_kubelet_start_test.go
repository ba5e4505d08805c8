package analyze

import (
	"strings"
	"testing"
)

// The kubelet's main goroutine blocked in a stat syscall is a start that
// waits on a filesystem, whatever the dump says of minutes; other
// goroutines, or main parked where a running kubelet parks it, are not.
func TestStuckStart(t *testing.T) {
	const statfs = "syscall.Statfs({0xc000b62010?, 0xc000a238c0?}, 0xc000a238a0)\n" +
		"\tsyscall/zsyscall_linux_amd64.go:1376 +0x78\n" +
		"github.com/google/cadvisor/fs.getVfsStats({0xc000b62010?, 0x5?})\n" +
		"\tgithub.com/google/cadvisor@v0.49.0/fs/fs.go:720 +0x5d\n"
	const stat = "os.Stat({0xc0012, 0x40})\n\tos/stat.go:13 +0x2f\n" +
		"k8s.io/mount-utils.(*Mounter).IsLikelyNotMountPoint(0x0, {0xc0012, 0x40})\n\tmount_linux.go:100 +0x1\n"
	const parked = "k8s.io/kubernetes/cmd/kubelet/app.Run(...)\n\tserver.go:1 +0x1\n" +
		"os.Stat({0xc0012, 0x40})\n\tos/stat.go:13 +0x2f\n"
	cases := []struct {
		name, dump string
		want       int
	}{
		{"main in statfs, no minutes (go1.22 header)", "goroutine 1 gp=0xc0000061c0 m=7 mp=0xc000600008 [syscall]:\n" + statfs, 1},
		{"main in stat, no minutes", "goroutine 1 [syscall]:\n" + stat, 1},
		{"main in statfs for minutes is stuckCleanup's", "goroutine 1 [syscall, 7 minutes]:\n" + statfs, 0},
		{"another goroutine in statfs", "goroutine 412 [syscall]:\n" + statfs, 0},
		{"main parked in a receive", "goroutine 1 [chan receive, 90 minutes]:\n" + parked, 0},
		{"main running", "goroutine 1 [running]:\n" + stat, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := parseGoroutines("kubelet/goroutine-debug2.txt", strings.NewReader(c.dump))
			if err != nil {
				t.Fatal(err)
			}
			st := &state{kubeDumps: []*goroutineDump{d}}
			got := st.stuckStart()
			if len(got) != c.want {
				t.Fatalf("stuckStart = %d goroutines (%+v), want %d", len(got), got, c.want)
			}
			if c.want > 0 && !onlyMain(got) {
				t.Errorf("onlyMain(%+v) = false", got)
			}
		})
	}
	if onlyMain(nil) || onlyMain([]goroutine{{ID: 1}, {ID: 7}}) {
		t.Error("onlyMain of no goroutines, or of main with another, must be false")
	}
}
