package storageclients

import (
	"context"
	"path"
	"sort"
	"strings"
	"sync"

	"github.com/nodesnap/nodesnap/bundle/layout"
)

// The state read once, between the two samples: NFS, sunrpc, ceph, rbd,
// iSCSI and SCSI, device-mapper, block queue settings, FUSE limits, CIFS.

func (c *collector) static(ctx context.Context, blocks []string) {
	var wg sync.WaitGroup
	for _, fn := range []func(context.Context){
		c.nfs, c.sunrpc, c.ceph, c.rbd, c.iscsi, c.cifs,
		func(ctx context.Context) { c.block(ctx, blocks) },
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(ctx)
		}()
	}
	wg.Wait()
}

func (c *collector) nfs(ctx context.Context) {
	// pid 1's view: the host's mounts, also when nodesnap runs in a pod.
	ms := c.read(ctx, "reading the NFS mount statistics", ReadRequest{Base: c.env.ProcPath("1"), Files: []string{"mountstats"}, Max: maxFile})
	if b := ms.Files["mountstats"]; len(b) > 0 {
		c.rep.NFSMounts = ParseMountstats(b)
		if len(c.rep.NFSMounts) > 0 {
			c.keepRaw("mountstats.txt", b)
		}
	}
	fs := ReadRequest{Base: c.env.ProcPath("fs/nfsfs"), Files: []string{"servers", "volumes"}}
	var r ReadResult
	if err := c.env.Do(ctx, opRead, fs.Base, fs, &r); err != nil {
		c.errorf("reading /proc/fs/nfsfs: %v", err)
		return
	}
	c.rep.NFSServers = ParseNFSServers(r.Files["servers"])
	c.rep.NFSVolumes = ParseNFSVolumes(r.Files["volumes"])
	if len(c.rep.NFSServers) > 0 {
		c.keepRaw("nfsfs-servers.txt", r.Files["servers"])
		c.keepRaw("nfsfs-volumes.txt", r.Files["volumes"])
	}
}

func (c *collector) debugfs(ctx context.Context, what string, rq ReadRequest) (ReadResult, error) {
	r, err := c.kernelFS(ctx, what, "debugfs", debugfsMagic, c.env.SysPath("kernel/debug"), rq)
	if err == nil {
		c.mu.Lock()
		if c.rep.Debugfs == "" || r.Mounted == "private" {
			c.rep.Debugfs = r.Mounted
		}
		c.mu.Unlock()
	} else {
		c.mu.Lock()
		c.rep.Debugfs = "unavailable: " + err.Error()
		c.mu.Unlock()
	}
	return r, err
}

// sunrpc reads each RPC client's in-flight tasks and its transport's
// address (the NFS server, or the portmapper/lockd peers).
func (c *collector) sunrpc(ctx context.Context) {
	l, err := c.debugfs(ctx, "listing the sunrpc clients", ReadRequest{Base: "sunrpc", Lists: []string{"rpc_clnt"}})
	if err != nil {
		return
	}
	ids := l.Lists["rpc_clnt"]
	if len(ids) == 0 {
		return
	}
	rq := ReadRequest{Base: "sunrpc"}
	for _, id := range ids {
		rq.Files = append(rq.Files, "rpc_clnt/"+id+"/tasks")
		rq.Links = append(rq.Links, "rpc_clnt/"+id+"/xprt")
	}
	r, err := c.debugfs(ctx, "reading the sunrpc clients' tasks", rq)
	if err != nil {
		return
	}
	xrq := ReadRequest{Base: "sunrpc"}
	xprts := map[string]string{}
	for _, id := range ids {
		if t := r.Links["rpc_clnt/"+id+"/xprt"]; t != "" {
			x := path.Base(t)
			xprts[id] = x
			xrq.Files = append(xrq.Files, "rpc_xprt/"+x+"/info")
		}
	}
	var xr ReadResult
	if len(xrq.Files) > 0 {
		xr, _ = c.debugfs(ctx, "reading the sunrpc transports", xrq)
	}
	for _, id := range ids {
		rc := layout.RPCClient{ID: id, Xprt: xprts[id], Tasks: ParseRPCTasks(r.Files["rpc_clnt/"+id+"/tasks"])}
		if e := r.Errs["rpc_clnt/"+id+"/tasks"]; e != "" {
			rc.Errors = append(rc.Errors, e)
		}
		if x := xprts[id]; x != "" {
			kv := ParseKeyValues(xr.Files["rpc_xprt/"+x+"/info"])
			rc.Addr, rc.Port, rc.Netid = kv["addr"], kv["port"], kv["netid"]
		}
		c.rep.RPCClients = append(c.rep.RPCClients, rc)
	}
}

// cephFiles are each kernel ceph client's debugfs files.
var cephFiles = []string{"status", "monc", "osdc", "mdsc", "caps"}

// ceph reads every kernel ceph client, one worker item per file: mdsc
// and osdc take the client's locks, which a stuck request can hold.
func (c *collector) ceph(ctx context.Context) {
	l, err := c.debugfs(ctx, "listing the ceph clients", ReadRequest{Base: ".", Lists: []string{"ceph"}})
	if err != nil {
		return
	}
	for _, dir := range l.Lists["ceph"] {
		cc := layout.CephClient{Dir: dir}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, f := range cephFiles {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := c.debugfs(ctx, "reading ceph/"+dir+"/"+f, ReadRequest{Base: "ceph/" + dir, Files: []string{f}})
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					cc.Errors = append(cc.Errors, f+": "+err.Error())
					return
				}
				if e := r.Errs[f]; e != "" {
					cc.Errors = append(cc.Errors, f+": "+e)
				}
				b := r.Files[f]
				c.keepRaw("ceph/"+dir+"/"+f, b)
				switch f {
				case "status":
					cc.Status = ParseKeyValues(b)
				case "monc":
					cc.Monc = lines(b, 64)
				case "osdc":
					cc.OSDRequests = ParseCephOSDC(b)
				case "mdsc":
					cc.MDSRequests = ParseCephMDSC(b)
				case "caps":
					cc.Caps = lines(b, 8)
				}
			}()
		}
		wg.Wait()
		sort.Strings(cc.Errors)
		c.rep.Ceph = append(c.rep.Ceph, cc)
	}
}

// rbdFiles are the attributes `rbd showmapped` prints. config_info is
// left alone: it holds the client's key.
var rbdFiles = []string{"pool", "pool_ns", "name", "current_snap", "client_id", "cluster_fsid", "major", "minor"}

func (c *collector) rbd(ctx context.Context) {
	base := c.env.SysPath("bus/rbd/devices")
	l := ReadResult{}
	if err := c.env.Do(ctx, opRead, base, ReadRequest{Base: base, Lists: []string{"."}}, &l); err != nil {
		c.errorf("listing the rbd devices: %v", err)
		return
	}
	ids := l.Lists["."]
	if len(ids) == 0 {
		return
	}
	rq := ReadRequest{Base: base}
	for _, id := range ids {
		for _, f := range rbdFiles {
			rq.Files = append(rq.Files, id+"/"+f)
		}
	}
	r := c.read(ctx, "reading the rbd devices", rq)
	for _, id := range ids {
		v := func(f string) string { return strings.TrimSpace(string(r.Files[id+"/"+f])) }
		d := layout.RBDDevice{ID: id, Pool: v("pool"), PoolNS: v("pool_ns"), Image: v("name"), Snap: v("current_snap"),
			ClientID: v("client_id"), ClusterF: v("cluster_fsid"), Major: v("major"), Minor: v("minor"), Device: "/dev/rbd" + id}
		if d.Snap == "-" {
			d.Snap = ""
		}
		c.rep.RBD = append(c.rep.RBD, d)
	}
}

// iscsi reads the iSCSI sessions, their connections and hosts, and every
// SCSI device's state.
func (c *collector) iscsi(ctx context.Context) {
	class := c.env.SysPath("class")
	l := c.read(ctx, "listing the iSCSI and SCSI devices", ReadRequest{Base: class, Lists: []string{"iscsi_session", "iscsi_connection", "scsi_device"}})
	sessions, conns, sdevs := l.Lists["iscsi_session"], l.Lists["iscsi_connection"], l.Lists["scsi_device"]
	if len(sessions) == 0 && len(sdevs) == 0 {
		return
	}
	rq := ReadRequest{Base: class}
	for _, s := range sessions {
		rq.Files = append(rq.Files, "iscsi_session/"+s+"/state", "iscsi_session/"+s+"/targetname", "iscsi_session/"+s+"/recovery_tmo")
	}
	for _, cn := range conns {
		rq.Files = append(rq.Files, "iscsi_connection/"+cn+"/persistent_address", "iscsi_connection/"+cn+"/persistent_port", "iscsi_connection/"+cn+"/state")
	}
	for _, d := range sdevs {
		rq.Files = append(rq.Files, "scsi_device/"+d+"/device/state")
		rq.Links = append(rq.Links, "scsi_device/"+d)
		rq.Lists = append(rq.Lists, "scsi_device/"+d+"/device/block")
	}
	// The sessions' hosts: their state (scsi_host) and the initiator's
	// address on them (iscsi_host).
	hosts := map[string]bool{}
	for _, s := range sessions {
		rq.Links = append(rq.Links, "iscsi_session/"+s)
	}
	r := c.read(ctx, "reading the iSCSI and SCSI devices", rq)
	for _, s := range sessions {
		if h := pathElem(r.Links["iscsi_session/"+s], "host"); h != "" {
			hosts[h] = true
		}
	}
	if len(hosts) > 0 {
		hrq := ReadRequest{Base: class}
		for h := range hosts {
			hrq.Files = append(hrq.Files, "scsi_host/"+h+"/state", "iscsi_host/"+h+"/ipaddress")
		}
		hr := c.read(ctx, "reading the iSCSI hosts", hrq)
		if r.Files == nil {
			r.Files = map[string][]byte{}
		}
		for k, b := range hr.Files {
			r.Files[k] = b
		}
	}
	v := func(k string) string { return strings.TrimSpace(string(r.Files[k])) }
	for _, d := range sdevs {
		sd := layout.SCSIDevice{HCTL: d, State: v("scsi_device/" + d + "/device/state")}
		if bl := r.Lists["scsi_device/"+d+"/device/block"]; len(bl) > 0 {
			sd.Block = bl[0]
		}
		sd.Session = pathElem(r.Links["scsi_device/"+d], "session")
		c.rep.SCSIDevices = append(c.rep.SCSIDevices, sd)
	}
	for _, s := range sessions {
		is := layout.ISCSISession{Name: s, State: v("iscsi_session/" + s + "/state"), TargetName: v("iscsi_session/" + s + "/targetname"),
			RecoveryTMO: v("iscsi_session/" + s + "/recovery_tmo"), Host: pathElem(r.Links["iscsi_session/"+s], "host")}
		if is.Host != "" {
			is.HostState = v("scsi_host/" + is.Host + "/state")
			is.InitiatorAddr = v("iscsi_host/" + is.Host + "/ipaddress")
		}
		id := strings.TrimPrefix(s, "session")
		for _, cn := range conns {
			if strings.HasPrefix(cn, "connection"+id+":") {
				is.Address = v("iscsi_connection/" + cn + "/persistent_address")
				is.Port = v("iscsi_connection/" + cn + "/persistent_port")
				is.ConnState = v("iscsi_connection/" + cn + "/state")
				break
			}
		}
		for _, sd := range c.rep.SCSIDevices {
			if sd.Session == s && sd.Block != "" {
				is.Devices = append(is.Devices, sd.Block)
			}
		}
		c.rep.ISCSISessions = append(c.rep.ISCSISessions, is)
	}
}

// pathElem finds the element of a sysfs link target that starts with
// prefix and a digit ("session3", "host2").
func pathElem(link, prefix string) string {
	for _, e := range strings.Split(link, "/") {
		if rest, ok := strings.CutPrefix(e, prefix); ok && rest != "" && rest[0] >= '0' && rest[0] <= '9' && !strings.ContainsAny(rest, ":") {
			return e
		}
	}
	return ""
}

// queueFiles are the queue settings kept per block device.
var queueFiles = []string{"scheduler", "nr_requests", "rotational", "max_sectors_kb", "read_ahead_kb", "io_timeout"}

// block reads each block device's identity, queue settings, stacking and
// device-mapper identity.
func (c *collector) block(ctx context.Context, blocks []string) {
	if len(blocks) == 0 {
		return
	}
	rq := ReadRequest{Base: c.env.SysPath("block")}
	for _, n := range blocks {
		rq.Files = append(rq.Files, n+"/dev")
		for _, q := range queueFiles {
			rq.Files = append(rq.Files, n+"/queue/"+q)
		}
		rq.Lists = append(rq.Lists, n+"/slaves", n+"/holders")
		if strings.HasPrefix(n, "loop") {
			rq.Files = append(rq.Files, n+"/loop/backing_file")
		}
		if strings.HasPrefix(n, "dm-") {
			rq.Files = append(rq.Files, n+"/dm/name", n+"/dm/uuid", n+"/dm/suspended")
		}
	}
	r := c.read(ctx, "reading the block devices", rq)
	v := func(k string) string { return strings.TrimSpace(string(r.Files[k])) }
	for _, n := range blocks {
		d := layout.BlockQueue{Name: n, Slaves: r.Lists[n+"/slaves"], Holders: r.Lists[n+"/holders"], BackingFile: v(n + "/loop/backing_file")}
		d.Dev, _ = ParseDev(r.Files[n+"/dev"])
		for _, q := range queueFiles {
			if s := v(n + "/queue/" + q); s != "" {
				if d.Queue == nil {
					d.Queue = map[string]string{}
				}
				d.Queue[q] = s
			}
		}
		c.rep.Block = append(c.rep.Block, d)
		if strings.HasPrefix(n, "dm-") {
			dm := layout.DMDevice{Block: n, Dev: d.Dev, Name: v(n + "/dm/name"), UUID: v(n + "/dm/uuid"), Suspend: v(n + "/dm/suspended"),
				Slaves: d.Slaves, Holders: d.Holders}
			dm.Multipath = strings.HasPrefix(dm.UUID, "mpath-")
			c.rep.DM = append(c.rep.DM, dm)
		}
	}
}

// cifs keeps the CIFS client's DebugData and Stats as they are: their
// format changes with every kernel release, and the expert reads them.
func (c *collector) cifs(ctx context.Context) {
	base := c.env.ProcPath("fs/cifs")
	var r ReadResult
	if err := c.env.Do(ctx, opRead, base, ReadRequest{Base: base, Files: []string{"DebugData", "Stats"}}, &r); err != nil {
		c.errorf("reading /proc/fs/cifs: %v", err)
		return
	}
	for _, f := range []string{"DebugData", "Stats"} {
		if b := r.Files[f]; len(b) > 0 {
			c.keepRaw("cifs-"+f+".txt", b)
			c.rep.CIFS = append(c.rep.CIFS, "raw/cifs-"+f+".txt")
		}
	}
}
