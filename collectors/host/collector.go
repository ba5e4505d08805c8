package host

import (
	"context"
	"runtime"
	"strings"
	"time"

	"github.com/shirou/gopsutil/v4/common"
	"github.com/shirou/gopsutil/v4/cpu"
	"github.com/shirou/gopsutil/v4/load"
	"github.com/shirou/gopsutil/v4/mem"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/collectors/hostfs"
	"github.com/nodesnap/nodesnap/collectors/internal/shared"
	"github.com/nodesnap/nodesnap/internal/procfs"
)

func init() {
	collectors.Register(collectors.Spec{
		Name:           layout.DirHost,
		Description:    "hostname, kernel, os-release, uptime, load, cpu and memory, cgroup version, boot id",
		Requires:       "nothing beyond reading /proc and /etc; root for a few /proc files",
		DefaultEnabled: true,
		PrestartWorker: true, // every run reads through a worker
		DefaultTimeout: 15 * time.Second,
		After:          []string{collectors.MountprobeName},
		Files:          files,
		Run:            collect,
	})
}

// hostSummary is host/summary.json.
type hostSummary struct {
	Hostname      string    `json:"hostname"`
	Kernel        string    `json:"kernel"`
	KernelVersion string    `json:"kernel_version,omitempty"`
	Arch          string    `json:"arch"`
	OS            string    `json:"os,omitempty"`
	OSVersion     string    `json:"os_version,omitempty"`
	BootID        string    `json:"boot_id,omitempty"`
	MachineID     string    `json:"machine_id,omitempty"`
	BootTime      time.Time `json:"boot_time,omitzero"`
	UptimeSeconds uint64    `json:"uptime_seconds"`
	Load1         float64   `json:"load1"`
	Load5         float64   `json:"load5"`
	Load15        float64   `json:"load15"`
	CPUs          int       `json:"cpus"`
	CPUModel      string    `json:"cpu_model,omitempty"`
	MemTotal      uint64    `json:"mem_total_bytes"`
	MemAvailable  uint64    `json:"mem_available_bytes"`
	SwapTotal     uint64    `json:"swap_total_bytes"`
	CgroupVersion string    `json:"cgroup_version"`
	Errors        []string  `json:"errors,omitempty"`
}

// hostRawFiles are copied verbatim (redacted): an expert reads these first.
var hostRawFiles = []struct{ src, dst string }{
	{"/etc/os-release", "os-release"},
	{"/proc/version", "proc/version"},
	{"/proc/cmdline", "proc/cmdline"},
	{"/proc/uptime", "proc/uptime"},
	{"/proc/loadavg", "proc/loadavg"},
	{"/proc/meminfo", "proc/meminfo"},
	{"/proc/cpuinfo", "proc/cpuinfo"},
	{"/proc/pressure/io", "proc/pressure-io"},
	{"/proc/pressure/memory", "proc/pressure-memory"},
	{"/proc/pressure/cpu", "proc/pressure-cpu"},
	{"/proc/diskstats", "proc/diskstats"},
	{"/proc/vmstat", "proc/vmstat"},
	{"/proc/sys/kernel/hung_task_timeout_secs", "proc/sys-kernel-hung_task_timeout_secs"},
	{"/proc/filesystems", "proc/filesystems"},
	{"/proc/partitions", "proc/partitions"},
}

func collect(ctx context.Context, env *collectors.Env) error {
	// Tell gopsutil where the host's files are (a container sees the host
	// under --root).
	gctx := context.WithValue(ctx, common.EnvKey, common.EnvMap{
		common.HostProcEnvKey: env.Proc,
		common.HostSysEnvKey:  env.Sys,
		common.HostEtcEnvKey:  env.Host().Seen("/etc"),
		common.HostVarEnvKey:  env.Host().Seen("/var"),
		common.HostRunEnvKey:  env.Host().Seen("/run"),
		common.HostDevEnvKey:  env.Host().Seen("/dev"),
	})
	s := hostSummary{Arch: runtime.GOARCH}
	read := func(p hostfs.Path) string {
		r, err := env.Host().Read(ctx, p, 64<<10)
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(r.Data))
	}
	// The host's own view, read through the proc root (correct inside a
	// container, where uname would describe the container's UTS namespace).
	s.Hostname = read("/proc/sys/kernel/hostname")
	s.Kernel = read("/proc/sys/kernel/osrelease")
	s.KernelVersion = read("/proc/sys/kernel/version")
	s.BootID = read("/proc/sys/kernel/random/boot_id")
	s.MachineID = read("/etc/machine-id")

	// Not gopsutil's host.Info: it runs lsb_release, a program started
	// outside the isolation layer and blind to --root. The same facts come
	// from files under the roots.
	if s.Hostname == "" || (env.Root != "" && env.Root != "/") {
		// /proc/sys/kernel/hostname answers for the reader's own UTS
		// namespace, which in a pod without hostNetwork is the pod's: under
		// --root the host's /etc/hostname is the better witness.
		if h := read("/etc/hostname"); h != "" && !strings.ContainsAny(h, " \n") {
			if s.Hostname != "" && s.Hostname != h {
				env.Notef("hostname: %s in the host's /etc/hostname, %s in this process's UTS namespace; using the host's", h, s.Hostname)
			}
			s.Hostname = h
		}
	}
	s.OS, s.OSVersion = osRelease(read("/etc/os-release"))
	if u, err := procfs.ParseUptime([]byte(read("/proc/uptime"))); err == nil {
		s.UptimeSeconds = uint64(u.Seconds)
	}
	if bt := shared.BootTime(env); !bt.IsZero() {
		s.BootTime = bt.UTC()
	}
	if la, err := load.AvgWithContext(gctx); err == nil {
		s.Load1, s.Load5, s.Load15 = la.Load1, la.Load5, la.Load15
	} else {
		s.Errors = append(s.Errors, "load: "+err.Error())
	}
	if vm, err := mem.VirtualMemoryWithContext(gctx); err == nil {
		s.MemTotal, s.MemAvailable, s.SwapTotal = vm.Total, vm.Available, vm.SwapTotal
	} else {
		s.Errors = append(s.Errors, "memory: "+err.Error())
	}
	if n, err := cpu.CountsWithContext(gctx, true); err == nil {
		s.CPUs = n
	}
	if ci, err := cpu.InfoWithContext(gctx); err == nil && len(ci) > 0 {
		s.CPUModel = ci[0].ModelName
	}
	s.CgroupVersion = cgroupVersion(ctx, env)

	if s.Hostname != "" {
		env.Fact("hostname", s.Hostname)
	}
	env.Fact("kernel", s.Kernel)
	env.Fact("boot_id", s.BootID)
	env.Fact("machine_id", s.MachineID)
	if err := env.WriteJSON(layout.HostSummaryFile, s); err != nil {
		return err
	}
	missing := 0
	for _, f := range hostRawFiles {
		r, err := env.Host().Read(ctx, hostfs.Path(f.src), 8<<20)
		if err != nil {
			missing++
			continue
		}
		if err := env.WriteFile(f.dst, r.Data); err != nil {
			return err
		}
	}
	if missing > 0 {
		env.Notef("%d of %d host files were not present (normal on older kernels: pressure files need PSI)", missing, len(hostRawFiles))
	}
	if len(s.Errors) > 0 {
		env.Notef("%s", strings.Join(s.Errors, "; "))
	}
	return nil
}

// cgroupVersion tells v1, v2 (unified) or hybrid from the cgroup mount
// root, without statfs (its magic would need a syscall on a host path).
func cgroupVersion(ctx context.Context, env *collectors.Env) string {
	for _, c := range []struct {
		file    hostfs.Path
		version string
	}{
		{"/sys/fs/cgroup/cgroup.controllers", "v2"},
		{"/sys/fs/cgroup/unified/cgroup.controllers", "hybrid"},
		{"/sys/fs/cgroup/memory/memory.limit_in_bytes", "v1"},
	} {
		if _, err := env.Host().Read(ctx, c.file, 4096); err == nil {
			return c.version
		}
	}
	return "unknown"
}

// osRelease returns the distribution's ID and VERSION_ID from os-release.
func osRelease(data string) (id, version string) {
	for _, l := range strings.Split(data, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(l), "=")
		if !ok {
			continue
		}
		v = strings.Trim(v, `"'`)
		switch k {
		case "ID":
			id = v
		case "VERSION_ID":
			version = v
		}
	}
	return id, version
}
