package storageclients

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/internal/procfs"
)

// Options are the collector's own settings.
type Options struct {
	// SampleInterval separates the two samples of the counters.
	SampleInterval time.Duration `json:"sample_interval"`
}

// defaults are the options no flag changed: the one place a default is
// written.
var defaults = Options{SampleInterval: 300 * time.Millisecond}

// opts are the options the flags set (in the supervisor); they reach the
// collector's child as JSON.
var opts = defaults

func flags(fs *pflag.FlagSet) {
	opts = defaults
	fs.DurationVar(&opts.SampleInterval, "storageclients-sample-interval", opts.SampleInterval,
		"storageclients: time between the two samples of the kernel's counters (longer tells stuck from slow more surely, and makes the collector slower by as much)")
}

func init() {
	collectors.Register(collectors.Spec{
		Name:           layout.DirStorageClients,
		Description:    "the kernel's live storage-client state (NFS mountstats and RPC tasks, ceph osdc/mdsc, rbd, iSCSI, SCSI, device-mapper, block inflight, FUSE connections and daemons, CIFS), each read in a worker; mounts already stuck in the kernel are reported hung without a probe",
		Requires:       "root: /proc/1/mountstats, other processes' stacks and descriptors, debugfs (mounted in a private mount namespace when it is not: CAP_SYS_ADMIN) and fusectl",
		DefaultEnabled: true,
		DefaultTimeout: 15 * time.Second,
		Options:        &opts,
		Flags:          flags,
		Files:          files,
		Run:            collect,
	})
}

// collector is one run.
type collector struct {
	env *collectors.Env
	mu  sync.Mutex
	rep layout.StorageClients
	// raw files written beside state.json, name → bytes.
	raw map[string][]byte
}

func (c *collector) errorf(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.rep.Errors) < 200 {
		c.rep.Errors = append(c.rep.Errors, fmt.Sprintf(format, args...))
	}
}

func (c *collector) keepRaw(name string, b []byte) {
	if len(b) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.raw[name] = b
}

// read runs a ReadRequest in a worker; what could not be read is noted.
func (c *collector) read(ctx context.Context, what string, rq ReadRequest) ReadResult {
	var r ReadResult
	if err := c.env.Do(ctx, opRead, rq.Base, rq, &r); err != nil {
		c.errorf("%s: %v", what, err)
	}
	return r
}

// kernelFS reads debugfs or fusectl, mounted privately when needed.
func (c *collector) kernelFS(ctx context.Context, what, fstype string, magic int64, dir string, rq ReadRequest) (ReadResult, error) {
	var r ReadResult
	err := c.env.Do(ctx, opKernelFS, dir+"/"+rq.Base, KernelFSRequest{FSType: fstype, Magic: magic, Dir: dir, Read: rq}, &r)
	if err != nil {
		c.errorf("%s: %v", what, err)
	}
	return r, err
}

// sample is one reading of the counters and tasks.
type sample struct {
	fuse     map[uint32]int
	limits   map[uint32][2]int // max_background, congestion_threshold
	inflight map[string][2]int64
	stat     map[string][]uint64
	tasks    TasksResult
	tasksOK  bool
	at       time.Time
}

// pending reports whether anything waits on a FUSE daemon or a block
// device: only then can a second sample find it stuck.
func (s sample) pending() bool {
	for _, w := range s.fuse {
		if w > 0 {
			return true
		}
	}
	for _, v := range s.inflight {
		if v[0]+v[1] > 0 {
			return true
		}
	}
	return false
}

// tasksTimeout bounds one task list: it reads a few files of every task,
// which takes longer than one probe on a node with tens of thousands.
// mountprobe, and every collector after it, waits for this collector, so
// it stays a couple of probe deadlines.
const tasksTimeout = 6 * time.Second

func collect(ctx context.Context, env *collectors.Env) error {
	o := defaults
	if err := env.Options(&o); err != nil {
		return err
	}
	if o.SampleInterval <= 0 {
		o.SampleInterval = defaults.SampleInterval
	}
	started := time.Now()
	c := &collector{env: env, raw: map[string][]byte{}}
	c.rep.StartedAt = started.UTC()
	c.rep.SampleIntervalMS = o.SampleInterval.Milliseconds()

	mounts, err := env.Host().HostMounts(ctx)
	if err != nil {
		c.errorf("the host's mount table: %v", err)
	}
	conns, blocks := c.discover(ctx)
	first := c.sample(ctx, conns, blocks, true, true)
	// The slower reads of state fill the interval between the samples.
	c.static(ctx, blocks)
	second := first
	if first.pending() {
		if wait := o.SampleInterval - time.Since(first.at); wait > 0 {
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		// A task list that hung once (a mount table held by a stuck
		// unmount) would hang again: the second sample goes without it.
		second = c.sample(ctx, conns, blocks, false, first.tasksOK)
	} else {
		// Nothing waits on a FUSE daemon or a block device: nothing can
		// be stuck there, and a healthy node does not wait for a second
		// sample (mountprobe, and every collector after it, waits for
		// this one).
		c.rep.SampleIntervalMS = 0
	}
	c.fill(first, second, mounts)
	c.rep.Stuck = Verdicts(&c.rep, first.tasks.Tasks, second.tasks.Tasks)
	for _, s := range c.rep.Stuck {
		env.ReportStuck(s)
	}
	c.rep.DurationMS = float64(time.Since(started).Microseconds()) / 1000
	for name, b := range c.raw {
		if err := env.WriteFile("raw/"+name, b); err != nil {
			return err
		}
	}
	if err := env.WriteJSON(layout.StorageClientsFile, &c.rep); err != nil {
		return err
	}
	if n := len(c.rep.Stuck); n > 0 {
		names := make([]string, 0, n)
		for _, s := range c.rep.Stuck {
			names = append(names, s.Name)
		}
		env.Notef("%d filesystem(s) or device(s) already stuck in the kernel, reported hung without a probe: %s", n, strings.Join(names, ", "))
	}
	if len(c.rep.Errors) > 0 {
		env.Partialf("%d read(s) of the kernel's storage-client state failed or hung (see %s errors)", len(c.rep.Errors), layout.StorageClientsFile)
	}
	return nil
}

// discover lists the FUSE connections and block devices.
func (c *collector) discover(ctx context.Context) ([]string, []string) {
	var conns []string
	r, err := c.kernelFS(ctx, "listing the FUSE connections", "fusectl", fusectlMagic, c.env.SysPath("fs/fuse/connections"), ReadRequest{Base: ".", Lists: []string{"."}})
	if err == nil {
		c.rep.Fusectl = r.Mounted
		conns = r.Lists["."]
	} else {
		c.rep.Fusectl = "unavailable: " + err.Error()
	}
	b := c.read(ctx, "listing the block devices", ReadRequest{Base: c.env.SysPath("block"), Lists: []string{"."}})
	return conns, b.Lists["."]
}

// sample reads the FUSE waiting counts, the block devices' in-flight
// requests and counters, and the tasks waiting in storage code.
func (c *collector) sample(ctx context.Context, conns, blocks []string, holders, withTasks bool) sample {
	s := sample{fuse: map[uint32]int{}, limits: map[uint32][2]int{}, inflight: map[string][2]int64{}, stat: map[string][]uint64{}}
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		if len(conns) == 0 {
			return
		}
		rq := ReadRequest{Base: "."}
		for _, n := range conns {
			rq.Files = append(rq.Files, n+"/waiting")
			if holders {
				rq.Files = append(rq.Files, n+"/max_background", n+"/congestion_threshold")
			}
		}
		r, err := c.kernelFS(ctx, "reading the FUSE connections", "fusectl", fusectlMagic, c.env.SysPath("fs/fuse/connections"), rq)
		if err != nil {
			return
		}
		for _, n := range conns {
			id, ok := parseConn(n)
			if v, ok2 := ParseInt(r.Files[n+"/waiting"]); ok && ok2 {
				s.fuse[id] = v
			}
			mb, _ := ParseInt(r.Files[n+"/max_background"])
			ct, _ := ParseInt(r.Files[n+"/congestion_threshold"])
			s.limits[id] = [2]int{mb, ct}
		}
	}()
	go func() {
		defer wg.Done()
		if len(blocks) == 0 {
			return
		}
		rq := ReadRequest{Base: c.env.SysPath("block")}
		for _, n := range blocks {
			rq.Files = append(rq.Files, n+"/inflight", n+"/stat")
		}
		r := c.read(ctx, "reading the block devices' counters", rq)
		for _, n := range blocks {
			if v, ok := ParseInflight(r.Files[n+"/inflight"]); ok {
				s.inflight[n] = v
			}
			if v, ok := ParseBlockStat(r.Files[n+"/stat"]); ok {
				s.stat[n] = v
			}
		}
	}()
	go func() {
		defer wg.Done()
		if !withTasks {
			return
		}
		err := c.env.DoTimeout(ctx, max(tasksTimeout, c.env.ProbeTimeout), opTasks, c.env.ProcPath(), TasksRequest{Proc: c.env.ProcPath(), Holders: holders}, &s.tasks)
		if err != nil {
			c.errorf("listing the tasks waiting in storage code: %v", err)
			return
		}
		s.tasksOK = true
	}()
	wg.Wait()
	s.at = time.Now()
	return s
}

func parseConn(s string) (uint32, bool) {
	if !digits(s) {
		return 0, false
	}
	var n uint64
	for _, ch := range s {
		n = n*10 + uint64(ch-'0')
		if n > 1<<32-1 {
			return 0, false
		}
	}
	return uint32(n), true
}

// fill turns the samples into the report's FUSE and block records and
// names FUSE connections and block devices by their host mounts.
func (c *collector) fill(a, b sample, mounts []procfs.Mount) {
	byDev := map[string][]procfs.Mount{}
	for _, m := range mounts {
		byDev[m.Dev()] = append(byDev[m.Dev()], m)
	}
	for id, w := range a.fuse {
		fc := layout.FUSEConn{Conn: id, Waiting: w, Waiting2: b.fuse[id], MaxBackground: a.limits[id][0], CongestionThresh: a.limits[id][1]}
		for _, m := range byDev[procfs.DevString(0, id)] {
			fc.Mountpoints = append(fc.Mountpoints, m.MountPoint)
			fc.FSType, fc.Source = m.FSType, m.Source
		}
		c.rep.FUSE = append(c.rep.FUSE, fc)
	}
	sort.Slice(c.rep.FUSE, func(i, j int) bool { return c.rep.FUSE[i].Conn < c.rep.FUSE[j].Conn })
	for i := range c.rep.Block {
		d := &c.rep.Block[i]
		d.Inflight, d.Inflight2 = a.inflight[d.Name], b.inflight[d.Name]
		d.Stat, d.Stat2 = a.stat[d.Name], b.stat[d.Name]
	}
	c.rep.FUSEHolders = a.tasks.Holders
	c.rep.Errors = append(c.rep.Errors, a.tasks.Errors...)
}
