package storageclients

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors/hostfs"
	"github.com/nodesnap/nodesnap/engine/isolate"
	"github.com/nodesnap/nodesnap/internal/procfs"
)

// The tasks waiting in storage code, sampled twice: a task found waiting
// on the same thing in both samples, not scheduled in between, is stuck
// there, not busy. This is the evidence that lets a mount be reported
// hung without sending it one more request.

// storageWaits are wait channels of tasks asleep in a filesystem, the
// block layer or a storage transport (the processes collector's list: a
// task stuck on a FUSE mount sleeps in S state in request_wait_answer).
var storageWaits = []string{"request_wait_answer", "fuse_", "nfs", "rpc_wait", "__rpc_", "ceph_", "rbd_", "io_schedule",
	"folio_wait", "wait_on_page", "jbd2_", "blk_mq_", "scsi_", "iscsi_", "wait_on_buffer", "bit_wait_io", "submit_bio_wait"}

// TasksRequest asks for a sample of the tasks waiting in storage code.
type TasksRequest struct {
	Proc string `json:"proc"`
	// Holders also lists the processes holding /dev/fuse open.
	Holders bool `json:"holders,omitempty"`
}

// SampledTask is a task waiting in storage code, with what tells a later
// sample whether it ran in between.
type SampledTask struct {
	layout.StorageTask
	// Timeslices is the third field of schedstat (-1: unknown).
	Timeslices int64 `json:"timeslices"`
	// Mountpoint is the mount its syscall's file descriptor is on.
	Mountpoint string `json:"mountpoint,omitempty"`
	FSType     string `json:"fstype,omitempty"`
}

// TasksResult is one sample.
type TasksResult struct {
	Tasks   []SampledTask          `json:"tasks"`
	Holders []layout.FUSEDevHolder `json:"holders,omitempty"`
	Errors  []string               `json:"errors,omitempty"`
}

// maxTasks bounds the tasks one sample keeps.
const maxTasks = 2048

func storageWait(wchan string) bool {
	if strings.HasPrefix(wchan, "fuse_dev_") {
		return false // a FUSE daemon waiting for work, not on it
	}
	for _, p := range storageWaits {
		if strings.HasPrefix(wchan, p) {
			return true
		}
	}
	return false
}

func tasksOp(rq TasksRequest) (any, error) {
	pids, err := hostfs.ListPIDs(rq.Proc)
	if err != nil {
		return nil, err
	}
	res := TasksResult{Tasks: []SampledTask{}}
	mounts := map[uint64]map[int]procfs.Mount{}
	var buf [4096]byte
	for _, pid := range pids {
		pdir := filepath.Join(rq.Proc, strconv.Itoa(pid))
		tids, err := hostfs.ListPIDs(filepath.Join(pdir, "task"))
		if err != nil {
			continue // exited
		}
		var readers int
		for _, tid := range tids {
			tdir := filepath.Join(pdir, "task", strconv.Itoa(tid))
			b, err := hostfs.ReadSmall(filepath.Join(tdir, "stat"), buf[:])
			if err != nil {
				continue
			}
			st, err := procfs.ParseStat(b)
			if err != nil {
				continue
			}
			wchan := ""
			if st.State == "D" || st.State == "S" {
				if w, err := hostfs.ReadSmall(filepath.Join(tdir, "wchan"), buf[:256]); err == nil {
					wchan = strings.TrimSpace(string(w))
				}
			}
			if strings.HasPrefix(wchan, "fuse_dev_") {
				readers++
			}
			if st.State != "D" && !storageWait(wchan) {
				continue
			}
			if len(res.Tasks) >= maxTasks {
				continue
			}
			t := SampledTask{StorageTask: layout.StorageTask{PID: pid, TID: tid, Comm: st.Comm, State: st.State, Wchan: wchan,
				Kernel: st.Flags&procfs.PFKthread != 0}, Timeslices: -1}
			if s, err := hostfs.ReadSmall(filepath.Join(tdir, "schedstat"), buf[:256]); err == nil {
				if f := strings.Fields(string(s)); len(f) >= 3 {
					if n, err := strconv.ParseInt(f[2], 10, 64); err == nil {
						t.Timeslices = n
					}
				}
			}
			if s, err := hostfs.ReadSmall(filepath.Join(tdir, "stack"), buf[:]); err == nil {
				t.Stack = lines(s, 32)
				for i, l := range t.Stack {
					if _, rest, ok := strings.Cut(l, "] "); ok && strings.HasPrefix(l, "[<") {
						t.Stack[i] = rest
					}
				}
			}
			if !t.Kernel {
				attributeFD(&t, pdir, tdir, mounts)
			}
			res.Tasks = append(res.Tasks, t)
		}
		if rq.Holders {
			if h, ok := fuseHolder(pdir, pid); ok {
				h.Readers = readers
				res.Holders = append(res.Holders, h)
			}
		}
	}
	return res, nil
}

// attributeFD finds the mount a task's blocked syscall works on when its
// first argument is a file descriptor (read, write, fsync, getdents64,
// ioctl...): the descriptor's fdinfo names the mount, whose device is in
// the task's own mount table. A path-based call (stat, openat with
// AT_FDCWD) is not attributed this way.
func attributeFD(t *SampledTask, pdir, tdir string, mounts map[uint64]map[int]procfs.Mount) {
	var buf [512]byte
	b, err := hostfs.ReadSmall(filepath.Join(tdir, "syscall"), buf[:])
	if err != nil {
		return
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return
	}
	t.Syscall = f[0]
	arg, err := strconv.ParseUint(strings.TrimPrefix(f[1], "0x"), 16, 64)
	if err != nil || arg > 1<<20 {
		return
	}
	fd := strconv.FormatUint(arg, 10)
	target, err := os.Readlink(filepath.Join(pdir, "fd", fd))
	if err != nil {
		return
	}
	info, err := hostfs.ReadSmall(filepath.Join(pdir, "fdinfo", fd), buf[:])
	if err != nil {
		return
	}
	fi, err := procfs.ParseFDInfo(info)
	if err != nil || fi.MntID < 0 {
		return
	}
	ns, err := hostfs.NSInode(filepath.Join(pdir, "ns", "mnt"))
	if err != nil {
		return
	}
	table, ok := mounts[ns]
	if !ok {
		table = map[int]procfs.Mount{}
		if r, err := isolate.ReadFileLimited(filepath.Join(pdir, "mountinfo"), 32<<20); err == nil {
			ms, _ := procfs.ParseMountInfo(r.Data)
			for _, m := range ms {
				table[m.ID] = m
			}
		}
		mounts[ns] = table
	}
	m, ok := table[fi.MntID]
	if !ok {
		return
	}
	t.Dev = m.Dev()
	t.Mountpoint = m.MountPoint
	t.FSType = m.FSType
	t.Via = "file descriptor " + fd + " of its system call (" + trimKernelPath(target) + ")"
}

// fuseHolder reports a process holding /dev/fuse open: readlink of its
// descriptors only, nothing opened.
func fuseHolder(pdir string, pid int) (layout.FUSEDevHolder, bool) {
	d, err := os.Open(filepath.Join(pdir, "fd"))
	if err != nil {
		return layout.FUSEDevHolder{}, false
	}
	names, _ := d.Readdirnames(65536)
	d.Close()
	n := 0
	for _, name := range names {
		if t, err := os.Readlink(filepath.Join(pdir, "fd", name)); err == nil && t == "/dev/fuse" {
			n++
		}
	}
	if n == 0 {
		return layout.FUSEDevHolder{}, false
	}
	h := layout.FUSEDevHolder{PID: pid, Comm: hostfs.ReadComm(filepath.Join(pdir, "comm")), FDs: n}
	if ns, err := hostfs.NSInode(filepath.Join(pdir, "ns", "mnt")); err == nil {
		h.MountNS = ns
	}
	return h, true
}
