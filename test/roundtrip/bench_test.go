package roundtrip_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/bundle/layout"
	mountscollector "github.com/nodesnap/nodesnap/collectors/mounts"
	"github.com/nodesnap/nodesnap/internal/procfs"
	"github.com/nodesnap/nodesnap/read/analyze"
)

// The benchmark of issue 8: analyze a bundle with 1,000,000 open-file
// records and 50,000 mounts; wall time and peak RSS (targets: under 5 s
// and 256 MiB). The analysis runs in a child process (this test binary,
// re-executed) so that its peak RSS is its own, not the generator's.

const (
	benchHostNS     = 4026531840
	benchContainers = 400
	benchCtrMounts  = 100 // per container namespace
	benchHostMounts = 10_000
	benchProcesses  = 10_000 // 2,000 on the host, 20 per container
	benchFDs        = 100    // per process: 1,000,000 in all
	benchLogLines   = 100_000
)

// childEnv names the bundle a child analyses (see TestMain).
const childEnv = "NODESNAP_ANALYZE_BENCH_CHILD"

// runBenchChild is the child's whole life: analyse, print a one-line
// summary, exit.
func runBenchChild(p string) {
	start := time.Now()
	r, err := analyze.AnalyzeFile(context.Background(), p, analyze.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var found []string
	for _, f := range r.Findings {
		found = append(found, f.ID+" "+f.Subject)
	}
	// VmHWM is this process's own peak: the rusage of a child counts the
	// parent's memory at the exec (it is inherited with the mm replaced).
	hwm := ""
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
				hwm = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB"))
			}
		}
	}
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	fmt.Printf("%s %d\n%d files, %d bytes in %v (cpu %v); findings: %s\n", hwm, cpu.Nanoseconds(), r.FilesRead, r.BytesRead, time.Since(start).Round(time.Millisecond), cpu.Round(time.Millisecond), strings.Join(found, ", "))
	os.Exit(0)
}

// benchBundle is generated once per test binary (the benchmark function
// runs again for each b.N it tries) and removed by TestMain.
var benchBundle struct {
	once sync.Once
	dir  string
	path string
}

func BenchmarkAnalyzeLargeBundle(b *testing.B) {
	benchBundle.once.Do(func() { benchBundle.path = largeBundle(b) })
	p := benchBundle.path
	if p == "" {
		b.Fatal("no benchmark bundle")
	}
	st, _ := os.Stat(p)
	b.Logf("bundle: %s, %d MiB compressed", p, st.Size()>>20)
	b.ResetTimer()
	var maxRSS int64
	var cpu time.Duration
	var out string
	for i := 0; i < b.N; i++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"="+p)
		o, err := cmd.Output()
		if err != nil {
			b.Fatalf("analysis child: %v %s", err, o)
		}
		head, rest, _ := strings.Cut(strings.TrimSpace(string(o)), "\n")
		var kib, ns int64
		if _, err := fmt.Sscan(head, &kib, &ns); err != nil {
			b.Fatalf("child's figures %q: %v", head, err)
		}
		maxRSS, out = max(maxRSS, kib), rest
		cpu += time.Duration(ns)
	}
	b.StopTimer()
	b.ReportMetric(float64(maxRSS)/1024, "peak-RSS-MiB")
	// CPU time is the steadier figure on a shared machine.
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
	b.Logf("child: %s; peak RSS %d MiB", out, maxRSS>>10)
}

// largeBundle writes the benchmark bundle once per benchmark run.
// NODESNAP_BENCH_BUNDLE names a file to keep the bundle in (and reuse
// when it exists), to profile or to run nodesnap analyze on it by hand.
func largeBundle(b testing.TB) string {
	b.Helper()
	keep := os.Getenv("NODESNAP_BENCH_BUNDLE")
	if keep != "" {
		if _, err := os.Stat(keep); err == nil {
			return keep
		}
	}
	dir, err := os.MkdirTemp("", "nodesnap-analyze-bench-")
	if err != nil {
		b.Fatal(err)
	}
	benchBundle.dir = dir
	staging := filepath.Join(dir, "staging")
	defer func() { _ = os.RemoveAll(staging) }()
	files := map[string]func(w io.Writer) error{
		"mounts/mounts.json":        nil, // with the raw mountinfo files, below
		"openfiles/processes.jsonl": benchOpenFiles,
		"openfiles/holders.json":    benchHolders,
		"processes/tasks.json":      benchTasks,
		"mountprobe/probes.json":    nil,
		"journal/kubelet.log":       benchKubeletLog,
		"dirshape/shape.json":       benchShape,
	}
	write := func(name string, fn func(io.Writer) error) {
		p := filepath.Join(staging, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			b.Fatal(err)
		}
		f, err := os.Create(p)
		if err != nil {
			b.Fatal(err)
		}
		w := bufio.NewWriterSize(f, 1<<20)
		if err := fn(w); err != nil {
			b.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			b.Fatal(err)
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
	}
	nss := benchNamespaces()
	mounts := 0
	// Every table in one file, as the collector writes them.
	write("mounts/"+layout.MountinfoTablesFile, func(w io.Writer) error {
		for _, ns := range nss {
			mounts += len(ns.Mounts)
			h := layout.FormatMountinfoHeader(layout.MountinfoHeader{Inode: ns.Inode, PID: 1, TID: 1, Host: ns.Host})
			if _, err := io.WriteString(w, h+benchMountinfo(ns)); err != nil {
				return err
			}
		}
		return nil
	})
	if mounts != 50_000 {
		b.Fatalf("%d mounts", mounts)
	}
	write("mounts/mounts.json", func(w io.Writer) error {
		rep := layout.MountsReport{HostNamespace: benchHostNS, Processes: benchProcesses, Tasks: 3 * benchProcesses,
			Namespaces: nss, Devices: mountscollector.BuildMountDeviceIndex(nss)}
		return benchJSON(w, rep)
	})
	write("mountprobe/probes.json", func(w io.Writer) error { return benchProbes(w, nss) })
	for name, fn := range files {
		if fn != nil {
			write(name, fn)
		}
	}
	// The manifest lists every file written.
	now := time.Now().UTC()
	m := &bundle.Manifest{SchemaVersion: bundle.SchemaVersion, Tool: bundle.Tool{Name: "nodesnap", Version: "bench"},
		Host: bundle.Host{Hostname: "big-node"}, StartedAt: now, FinishedAt: now, Status: "complete",
		Settings: bundle.Settings{Compression: bundle.Gzip}, Redaction: bundle.RedactionSummary{Rules: map[string]int{}},
		Collectors: []bundle.CollectorResult{}, Files: []bundle.FileEntry{}, HungMounts: []bundle.HungItem{}, Omitted: []bundle.Omitted{}}
	err = filepath.Walk(staging, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(staging, p)
		size, sum, err := bundle.HashFile(p)
		m.Files = append(m.Files, bundle.FileEntry{Path: filepath.ToSlash(rel), Collector: strings.SplitN(filepath.ToSlash(rel), "/", 2)[0], Size: size, SHA256: sum, Kind: bundle.KindText})
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	out := filepath.Join(dir, "big.tar.gz")
	if keep != "" {
		out = keep
	}
	if _, err := bundle.Write(context.Background(), out, bundle.Gzip, m, staging, now); err != nil {
		b.Fatal(err)
	}
	return out
}

func benchJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func benchUID(i int) string {
	h := sha256.Sum256([]byte(fmt.Sprint(i)))
	x := hex.EncodeToString(h[:])
	return x[:8] + "-" + x[8:12] + "-4" + x[13:16] + "-8" + x[17:20] + "-" + x[20:32]
}

// benchNamespaces: the host with 10,000 mounts (mostly pod volumes) and
// 400 containers with 100 mounts each.
func benchNamespaces() []layout.MountNamespace {
	var nss []layout.MountNamespace
	host := layout.MountNamespace{Inode: benchHostNS, Host: true, Mountinfo: layout.MountinfoTablesFile,
		ProcessCount: 2000, TaskCount: 6000}
	for i := 0; i < 20; i++ {
		host.Processes = append(host.Processes, layout.NamespaceProcess{PID: 100 + i, Comm: "daemon", Threads: 3})
	}
	var lines []string
	lines = append(lines, "22 1 253:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw", "23 22 0:5 / /dev rw,nosuid shared:2 - devtmpfs udev rw",
		"24 22 0:21 / /proc rw shared:12 - proc proc rw", "25 22 0:24 / /run rw shared:5 - tmpfs tmpfs rw")
	for i := len(lines); i < benchHostMounts; i++ {
		uid := benchUID(i / 4)
		switch i % 4 {
		case 0, 1:
			lines = append(lines, fmt.Sprintf("%d 22 0:%d / /var/lib/kubelet/pods/%s/volumes/kubernetes.io~projected/kube-api-access-%d rw,relatime shared:%d - tmpfs tmpfs rw,size=4096k", 100+i, 1000+i, uid, i, 100+i))
		case 2:
			lines = append(lines, fmt.Sprintf("%d 22 253:1 /var/lib/csi-hostpath-data/vol-%d /var/lib/kubelet/pods/%s/volumes/kubernetes.io~csi/pvc-%d/mount rw,relatime shared:1 - ext4 /dev/vda1 rw", 100+i, i, uid, i))
		default:
			lines = append(lines, fmt.Sprintf("%d 25 0:%d / /run/containerd/io.containerd.runtime.v2.task/k8s.io/%064d/rootfs rw,relatime shared:%d - overlay overlay rw,lowerdir=/l,upperdir=/u,workdir=/w", 100+i, 1000+i, i, 100+i))
		}
	}
	host.Mounts = benchParse(lines)
	nss = append(nss, host)
	for c := 0; c < benchContainers; c++ {
		ns := layout.MountNamespace{Inode: uint64(4026532000 + c), Mountinfo: layout.MountinfoTablesFile, ProcessCount: 20, TaskCount: 60}
		for p := 0; p < 20; p++ {
			ns.Processes = append(ns.Processes, layout.NamespaceProcess{PID: 10000 + c*20 + p, Comm: "app", Threads: 3})
		}
		base := 100000 + c*benchCtrMounts
		lines := []string{fmt.Sprintf("%d %d 0:%d / / rw,relatime master:%d - overlay overlay rw", base, base-1, 1003+c*4, 103+c*4),
			fmt.Sprintf("%d %d 0:%d / /proc rw - proc proc rw", base+1, base, 20000+c),
			fmt.Sprintf("%d %d 253:1 /var/lib/kubelet/pods/%s/etc-hosts /etc/hosts rw,relatime master:1 - ext4 /dev/vda1 rw", base+2, base, benchUID(c)),
			fmt.Sprintf("%d %d 253:1 /var/lib/csi-hostpath-data/vol-%d /data rw,relatime master:1 - ext4 /dev/vda1 rw", base+3, base, c*4+2)}
		for m := len(lines); m < benchCtrMounts; m++ {
			lines = append(lines, fmt.Sprintf("%d %d 0:%d / /run/secrets/s%d rw,relatime - tmpfs tmpfs rw,size=1024k", base+m, base, 30000+c*benchCtrMounts+m, m))
		}
		ns.Mounts = benchParse(lines)
		nss = append(nss, ns)
	}
	return nss
}

func benchParse(lines []string) []layout.NamespaceMount {
	ms, bad := procfs.ParseMountInfo([]byte(strings.Join(lines, "\n") + "\n"))
	if len(bad) > 0 {
		panic(fmt.Sprint(bad))
	}
	out := make([]layout.NamespaceMount, len(ms))
	for i, m := range ms {
		out[i] = layout.NamespaceMount{Mount: m, PropagationType: mountscollector.PropagationType(m.Propagation), Class: procfs.Classify(m).String()}
	}
	return out
}

func benchMountinfo(ns layout.MountNamespace) string {
	var b strings.Builder
	for _, m := range ns.Mounts {
		prop := ""
		if s := m.Propagation.String(); s != "private" {
			prop = " " + s
		}
		fmt.Fprintf(&b, "%d %d %s %s %s %s%s - %s %s %s\n", m.ID, m.ParentID, m.Dev(), m.Root, m.MountPoint, strings.Join(m.Options, ","), prop, m.FSType, m.Source, m.SuperOptions)
	}
	return b.String()
}

func benchProbes(w io.Writer, nss []layout.MountNamespace) error {
	rep := layout.MountProbeReport{ProbeTimeoutMS: 3000, Counts: map[string]int{}}
	for _, ns := range nss {
		for _, m := range ns.Mounts {
			p := layout.MountProbe{Mountpoint: m.MountPoint, ProbePath: m.MountPoint, Namespaces: []uint64{ns.Inode}, ProbeNamespace: ns.Inode,
				MountID: m.ID, FSType: m.FSType, Source: m.Source, Dev: m.Dev(), Root: m.Root, Class: m.Class, Result: layout.ProbeOK, Probed: true, LatencyMS: 0.1}
			rep.Counts[p.Result]++
			rep.Probes = append(rep.Probes, p)
		}
	}
	return benchJSON(w, rep)
}

// benchOpenFiles: 10,000 processes of 100 file descriptors each.
func benchOpenFiles(w io.Writer) error {
	enc := json.NewEncoder(w)
	for i := 0; i < benchProcesses; i++ {
		p := layout.OpenFilesProcess{PID: 100 + i, PPID: 1, Comm: "daemon", Namespace: benchHostNS, FDCount: benchFDs + 3}
		container := i >= 2000
		if container {
			c := (i - 2000) / 20
			p.PID, p.Comm, p.Namespace = 10000+(i-2000), "app", uint64(4026532000+c)
			p.Cwd = &layout.OpenFile{Path: "/data", Kind: procfs.LinkPath, Dev: "253:1", MountID: 100000 + c*benchCtrMounts + 3, MountPoint: "/data"}
		} else {
			p.Cwd = &layout.OpenFile{Path: "/", Kind: procfs.LinkPath, Dev: "253:1", MountID: 22, MountPoint: "/"}
		}
		p.Exe = &layout.OpenFile{Path: "/usr/bin/" + p.Comm, Kind: procfs.LinkPath, Dev: "253:1", MountID: 22, MountPoint: "/"}
		for fd := 0; fd < benchFDs; fd++ {
			o := layout.OpenFD{FD: fd + 3, Pos: int64(fd) * 4096, Flags: "O_RDONLY|O_CLOEXEC"}
			switch {
			case container && fd%2 == 0:
				o.OpenFile = layout.OpenFile{Path: fmt.Sprintf("/data/cache/%d/f%d", fd%7, fd), Kind: procfs.LinkPath, Dev: "253:1", MountID: p.Cwd.MountID, MountPoint: "/data", Inode: uint64(1000 + fd)}
				o.Flags = "O_RDWR|O_CREAT|O_CLOEXEC"
			case container:
				o.OpenFile = layout.OpenFile{Path: fmt.Sprintf("/usr/lib/x86_64-linux-gnu/lib%d.so", fd), Kind: procfs.LinkPath, Dev: "0:1003", MountID: 100000, MountPoint: "/", Inode: uint64(2000 + fd)}
			case fd%10 == 0:
				o.OpenFile = layout.OpenFile{Path: fmt.Sprintf("/var/lib/kubelet/pods/%s/volumes/kubernetes.io~csi/pvc-%d/mount/f", benchUID(fd), fd), Kind: procfs.LinkPath, Dev: "253:1", MountID: 22, MountPoint: "/", Inode: uint64(3000 + fd)}
			default:
				o.OpenFile = layout.OpenFile{Path: fmt.Sprintf("/var/log/app/%d.log", fd), Kind: procfs.LinkPath, Dev: "253:1", MountID: 22, MountPoint: "/", Inode: uint64(4000 + fd)}
				o.Flags = "O_WRONLY|O_APPEND|O_CLOEXEC"
			}
			p.FDs = append(p.FDs, o)
		}
		if err := enc.Encode(&p); err != nil {
			return err
		}
	}
	return nil
}

func benchHolders(w io.Writer) error {
	sum := layout.OpenFilesSummary{HostNamespace: benchHostNS, Processes: benchProcesses, FDs: benchProcesses * benchFDs}
	root := layout.DeviceHolders{Dev: "253:1", Major: 253, Minor: 1, Block: &layout.BlockDevice{Name: "vda1", Partition: 1}, FSTypes: []string{"ext4"}, Sources: []string{"/dev/vda1"},
		KernelThreads: []layout.KernelThreadRef{{PID: 95, Comm: "jbd2/vda1-8"}}}
	for i := 0; i < benchProcesses; i++ {
		root.Holders = append(root.Holders, layout.FileHolder{PID: 100 + i, Comm: "daemon", Namespace: benchHostNS, Uses: []string{"cwd", "exe", "fd 3", "fd 4"}, UseCount: 102,
			Paths: []string{"/", "/usr/bin/daemon", "/var/log/app/1.log", "/var/log/app/2.log"}})
	}
	sum.Devices = append(sum.Devices, root)
	for c := 0; c < benchContainers; c++ {
		m := layout.MountHolders{Namespace: uint64(4026532000 + c), MountID: 100000 + c*benchCtrMounts + 3, MountPoint: "/data", Dev: "253:1", FSType: "ext4", Source: "/dev/vda1"}
		for p := 0; p < 20; p++ {
			m.Holders = append(m.Holders, layout.FileHolder{PID: 10000 + c*20 + p, Comm: "app", Namespace: m.Namespace, Uses: []string{"cwd", "fd 3"}, UseCount: 51, Paths: []string{"/data", "/data/cache/0/f0"}})
		}
		sum.Mounts = append(sum.Mounts, m)
	}
	return benchJSON(w, sum)
}

func benchTasks(w io.Writer) error {
	if _, err := io.WriteString(w, "[\n"); err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	for i := 0; i < benchProcesses; i++ {
		for th := 0; th < 3; th++ {
			t := layout.Task{PID: 100 + i, TID: 100 + i + th*100000, PPID: 1, Comm: "daemon", State: "S", Wchan: "futex_wait_queue", MountNS: benchHostNS}
			if th == 0 {
				t.TID = t.PID
				t.Cmdline = []string{"/usr/bin/daemon", "--flag", fmt.Sprint(i)}
			}
			if i == benchProcesses-1 && th == 2 {
				if err := enc.Encode(&t); err != nil {
					return err
				}
				break
			}
			b, _ := json.Marshal(&t)
			if _, err := w.Write(append(b, ",\n"...)); err != nil {
				return err
			}
		}
	}
	_, err := io.WriteString(w, "]\n")
	return err
}

// benchShape: one huge directory, in the volume container 0 mounts at
// /data, so the analysis looks for its writers among the million files.
func benchShape(w io.Writer) error {
	d := layout.DirShapeDir{Path: "/var/lib/csi-hostpath-data/vol-2/cache", Entries: 2_000_000, Subdirs: 2_000_000, InodeSize: 200 << 20, Nlink: 1, NlinkAnomaly: true}
	return benchJSON(w, layout.DirShapeReport{Roots: []layout.DirShapeRoot{{Path: "/var/lib/csi-hostpath-data", Kind: "root", Status: layout.DirShapeComplete,
		Complete: true, Mountpoint: "/", FSType: "ext4", Dev: "253:1", Entries: 2_000_100, Largest: []layout.DirShapeDir{d}, NlinkAnomalies: []layout.DirShapeDir{d}}}})
}

func benchKubeletLog(w io.Writer) error {
	if n := benchKubeletLines(); n > 0 {
		return benchKubeletJournal(w, n)
	}
	for i := 0; i < benchLogLines; i++ {
		var err error
		if i%10000 == 5 {
			_, err = fmt.Fprintf(w, "Nov 21 09:%02d:%02d big-node kubelet[812]: E1121 \"Skipping pod synchronization\" err=\"PLEG is not healthy: pleg was last seen active 3m12s ago; threshold is 3m0s\"\n", i/60%60, i%60)
		} else {
			_, err = fmt.Fprintf(w, "Nov 21 09:%02d:%02d big-node kubelet[812]: I1121 09:%02d:%02d.%06d     812 kubelet.go:2355] \"SyncLoop UPDATE\" source=\"api\" pods=[\"default/web-%d\"]\n", i/60%60, i%60, i/60%60, i%60, i, i)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
