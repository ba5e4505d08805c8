package storageclients

import (
	"bufio"
	"bytes"
	"strconv"
	"strings"

	"github.com/nodesnap/nodesnap/bundle/layout"
)

// The NFS client's formats: /proc/<pid>/mountstats (nfs_show_stats and
// rpc_clnt_show_stats in the kernel), /proc/fs/nfsfs/{servers,volumes},
// and the sunrpc debugfs files rpc_clnt/<n>/tasks and rpc_xprt/<n>/info.
// Each parser takes bytes and keeps what it understands; a malformed line
// is skipped, never a reason to fail the whole file.

// maxRecords bounds what one parser keeps from one file, whatever it holds.
const maxRecords = 4096

// ParseMountstats returns the NFS mounts of a mountstats file. Other
// filesystems' lines ("device ... with fstype ext4") are skipped.
func ParseMountstats(b []byte) []layout.NFSMount {
	var out []layout.NFSMount
	var cur *layout.NFSMount
	perOp := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	flush := func() {
		if cur != nil && len(out) < maxRecords {
			out = append(out, *cur)
		}
		cur = nil
	}
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "device ") {
			flush()
			perOp = false
			m, ok := parseMountstatsDevice(line)
			if ok && strings.HasPrefix(m.FSType, "nfs") {
				cur = &m
			}
			continue
		}
		if cur == nil {
			continue
		}
		key, val, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			if strings.TrimSpace(line) == "per-op statistics" {
				perOp = true
			}
			continue
		}
		val = strings.TrimSpace(val)
		if perOp {
			if op, ok := parseNFSOp(key, val); ok && len(cur.Ops) < 256 {
				cur.Ops = append(cur.Ops, op)
				cur.RPCs += op.Ops
				cur.Timeouts += op.Timeouts
				if op.Trans > op.Ops {
					cur.Retransmits += op.Trans - op.Ops
				}
			}
			continue
		}
		switch key {
		case "opts":
			cur.Opts = parseOpts(val)
		case "age":
			cur.AgeSeconds, _ = strconv.ParseInt(val, 10, 64)
		case "xprt":
			cur.Xprt = parseXprt(val)
		}
	}
	flush()
	return out
}

// parseMountstatsDevice reads "device SRC mounted on MP with fstype T
// [statvers=V]". The kernel escapes spaces in SRC and MP as \040.
func parseMountstatsDevice(line string) (layout.NFSMount, bool) {
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "device" || f[2] != "mounted" || f[3] != "on" || f[5] != "with" || f[6] != "fstype" {
		return layout.NFSMount{}, false
	}
	m := layout.NFSMount{Device: unescapeOctal(f[1]), Mountpoint: unescapeOctal(f[4]), FSType: f[7]}
	if len(f) > 8 {
		m.StatVers = strings.TrimPrefix(f[8], "statvers=")
	}
	m.Server, m.Export = splitNFSSource(m.Device)
	return m, true
}

// splitNFSSource splits "host:/export" (and "[v6addr]:/export").
func splitNFSSource(src string) (string, string) {
	if strings.HasPrefix(src, "[") {
		if i := strings.Index(src, "]:"); i > 0 {
			return src[1:i], src[i+2:]
		}
	}
	host, exp, ok := strings.Cut(src, ":")
	if !ok {
		return "", src
	}
	return host, exp
}

func parseOpts(s string) map[string]string {
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		if kv == "" || len(out) >= 128 {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		out[k] = v
	}
	return out
}

// parseXprt reads the counters after "xprt:". The fields per transport
// are those of xs_tcp_print_stats, xs_udp_print_stats and
// xprt_rdma_print_stats; older kernels (statvers 1.0) stop earlier.
func parseXprt(s string) *layout.NFSXprt {
	f := strings.Fields(s)
	if len(f) < 2 {
		return nil
	}
	n := make([]uint64, len(f)-1)
	for i, v := range f[1:] {
		n[i], _ = strconv.ParseUint(v, 10, 64)
	}
	at := func(i int) uint64 {
		if i < len(n) {
			return n[i]
		}
		return 0
	}
	x := &layout.NFSXprt{Proto: f[0]}
	switch f[0] {
	case "udp":
		x.Port, x.Binds, x.Sends, x.Receives, x.BadXIDs = at(0), at(1), at(2), at(3), at(4)
		x.CumActive, x.CumBacklog, x.MaxSlots, x.CumSending, x.CumPending = at(5), at(6), at(7), at(8), at(9)
	default: // tcp, tcp-tls, rdma share the first fields
		x.Port, x.Binds, x.Connects, x.ConnectTime, x.IdleSeconds = at(0), at(1), at(2), at(3), at(4)
		x.Sends, x.Receives, x.BadXIDs, x.CumActive, x.CumBacklog = at(5), at(6), at(7), at(8), at(9)
		x.MaxSlots, x.CumSending, x.CumPending = at(10), at(11), at(12)
	}
	if x.Sends >= x.Receives {
		x.InFlight = int64(x.Sends - x.Receives)
	}
	return x
}

// parseNFSOp reads "READ: ops trans timeouts sent recv queue rtt execute
// [errors]".
func parseNFSOp(name, s string) (layout.NFSOp, bool) {
	f := strings.Fields(s)
	if len(f) < 8 || name == "" || strings.ContainsAny(name, " \t") {
		return layout.NFSOp{}, false
	}
	var n [9]uint64
	for i := 0; i < len(f) && i < 9; i++ {
		v, err := strconv.ParseUint(f[i], 10, 64)
		if err != nil {
			return layout.NFSOp{}, false
		}
		n[i] = v
	}
	op := layout.NFSOp{Name: name, Ops: n[0], Trans: n[1], Timeouts: n[2], BytesSent: n[3], BytesRecv: n[4],
		QueueMS: n[5], RTTMS: n[6], ExecuteMS: n[7]}
	if len(f) >= 9 {
		op.Errors, op.ErrorsKnown = n[8], true
	}
	return op, true
}

// unescapeOctal undoes the kernel's \ooo escapes of mount paths.
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) && isOctal(s[i+1:i+4]) {
			v, _ := strconv.ParseUint(s[i+1:i+4], 8, 8)
			b.WriteByte(byte(v))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(s string) bool {
	if len(s) != 3 {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '7' {
			return false
		}
	}
	return s[0] <= '3'
}

// ParseNFSServers reads /proc/fs/nfsfs/servers:
// "NV SERVER   PORT USE HOSTNAME".
func ParseNFSServers(b []byte) []layout.NFSServer {
	var out []layout.NFSServer
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || f[0] == "NV" || !strings.HasPrefix(f[0], "v") || len(out) >= maxRecords {
			continue
		}
		use, err := strconv.Atoi(f[3])
		if err != nil {
			continue
		}
		out = append(out, layout.NFSServer{Version: f[0], ServerID: f[1], Port: f[2], Use: use, Hostname: f[4]})
	}
	return out
}

// ParseNFSVolumes reads /proc/fs/nfsfs/volumes:
// "NV SERVER   PORT DEV          FSID                              FSC".
func ParseNFSVolumes(b []byte) []layout.NFSVolume {
	var out []layout.NFSVolume
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || f[0] == "NV" || !strings.HasPrefix(f[0], "v") || len(out) >= maxRecords {
			continue
		}
		v := layout.NFSVolume{Version: f[0], ServerID: f[1], Port: f[2], Dev: f[3], FSID: f[4]}
		if len(f) > 5 {
			v.FSCache = f[5]
		}
		out = append(out, v)
	}
	return out
}

// ParseRPCTasks reads debugfs sunrpc/rpc_clnt/<n>/tasks, one task a line:
// "pid flags status clid xid timeout ops program+vers procedure a:action
// q:queue" (tasks_show in net/sunrpc/debugfs.c).
func ParseRPCTasks(b []byte) []layout.RPCTask {
	var out []layout.RPCTask
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 9 || len(out) >= maxRecords {
			continue
		}
		pid, err := strconv.ParseUint(f[0], 10, 32)
		if err != nil {
			continue
		}
		status, err := strconv.ParseInt(f[2], 10, 32)
		if err != nil {
			continue
		}
		timeout, _ := strconv.ParseInt(f[5], 10, 64)
		t := layout.RPCTask{PID: pid, Flags: f[1], Status: status, ClientID: f[3], XID: f[4], TimeoutJ: timeout, Ops: f[6]}
		// %ps of a module's symbol ends with " [module]".
		i := 7
		if i < len(f) && strings.HasPrefix(f[i], "[") {
			i++
		}
		if i+1 >= len(f) {
			continue
		}
		t.Program, t.Procedure = f[i], f[i+1]
		for _, x := range f[i+2:] {
			switch {
			case strings.HasPrefix(x, "a:"):
				t.Action = x[2:]
			case strings.HasPrefix(x, "q:"):
				t.Queue = x[2:]
			}
		}
		out = append(out, t)
	}
	return out
}

// ParseKeyValues reads "key: value" lines (rpc_xprt/<n>/info, ceph's
// status).
func ParseKeyValues(b []byte) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		k = strings.TrimSpace(k)
		if !ok || k == "" || len(out) >= 64 {
			continue
		}
		out[k] = strings.TrimSpace(v)
	}
	return out
}
