package analyze

import (
	"io"
	"strings"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/internal/jsonstream"
)

// Readers: one per collector file. Each keeps what the rules need and
// nothing else; big files are decoded one record at a time.

const (
	maxKeptTasks      = 5000
	maxKeptProbes     = 5000
	maxMountinfoLines = 50_000
	maxMountinfoBytes = 16 << 20
	maxHoldersKept    = 32
	maxDeviceNS       = 64
	maxKernelThreads  = 20_000
	// A node has at most pid_max (4M) tasks and rarely more than a few
	// hundred thousand mounts; past these, a bundle is hostile.
	maxProcs  = 1_000_000
	maxMounts = 1_000_000
	// maxSelfPIDs bounds nodesnap's own processes kept from a bundle.
	maxSelfPIDs = 10_000
)

// readTasks reads processes/tasks.json: an array of layout.Task, one
// per line.
func (st *state) readTasks(_ string, r io.Reader) error {
	st.tasksSeen = true
	dec := jsonstream.NewDecoder(r)
	err := jsonstream.WalkArray(dec, func() error {
		var t layout.Task
		if err := dec.Decode(&t); err != nil {
			return err
		}
		st.addTask(&t)
		return nil
	})
	if err != nil {
		return err
	}
	return jsonstream.EndOfInput(dec)
}

func (st *state) addTask(t *layout.Task) {
	if t.PID == t.TID && len(st.procs) < maxProcs {
		p := &procInfo{PID: t.PID, PPID: t.PPID, Comm: t.Comm, State: t.State, MountNS: t.MountNS, Kernel: t.Kernel,
			Start: t.StartTime, PodUID: t.PodUID, ContainerID: t.ContainerID}
		if len(t.Cmdline) > 0 {
			p.Cmdline = shorten(strings.Join(t.Cmdline, " "), 512)
		}
		st.procs[t.PID] = p
		if t.Kernel && len(st.kthreads) < maxKernelThreads {
			st.kthreads = append(st.kthreads, layout.KernelThreadRef{PID: t.PID, Comm: t.Comm})
		}
	}
	if t.State == "D" || fsWait(t.Wchan) {
		if len(st.tasks) < maxKeptTasks {
			st.tasks = append(st.tasks, *t)
		} else {
			st.tasksDropped++
		}
	}
}

// fsWait reports whether a wait channel is a filesystem's or a block
// layer's: a task sleeping there waits on a mount or a device. A process
// on a hung FUSE mount sleeps in request_wait_answer (state S or D).
func fsWait(w string) bool {
	if w == "" {
		return false
	}
	for _, s := range []string{"request_wait_answer", "fuse_", "nfs", "rpc_wait", "ceph", "rbd", "xprt", "cifs", "smb2", "afs_", "io_schedule", "folio_wait", "wait_on_page", "jbd2", "blk_mq_", "iscsi", "nbd_"} {
		if strings.Contains(w, s) {
			return true
		}
	}
	return false
}

// readProbes reads mountprobe/probes.json, keeping every probe that was
// not ok.
func (st *state) readProbes(_ string, r io.Reader) error {
	st.probesSeen = true
	dec := jsonstream.NewDecoder(r)
	err := jsonstream.WalkObject(dec, func(key string) error {
		if key != "probes" {
			return jsonstream.SkipValue(dec)
		}
		return jsonstream.WalkArray(dec, func() error {
			var p layout.MountProbe
			if err := dec.Decode(&p); err != nil {
				return err
			}
			st.probeCounts[p.Result]++
			if p.Result != layout.ProbeOK && len(st.probes) < maxKeptProbes {
				st.probes = append(st.probes, p)
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	return jsonstream.EndOfInput(dec)
}

// readStorageClients reads storageclients/state.json (bounded by the
// collector: its parsers keep at most maxRecords of each kind).
func (st *state) readStorageClients(_ string, r io.Reader) error {
	return decodeWhole(r, &st.storage)
}

// readShape reads dirshape/shape.json: bounded by the collector (top N
// directories, bounded leftover lists).
func (st *state) readShape(_ string, r io.Reader) error {
	return decodeWhole(r, &st.shape)
}

// readCSI reads csi/inventory.json (bounded by --csi-max-entries).
func (st *state) readCSI(_ string, r io.Reader) error {
	return decodeWhole(r, &st.csi)
}

// decodeWhole decodes the one JSON value of r into a new T, sets *dst to
// it, and fails if anything follows the value (*dst is kept then).
func decodeWhole[T any](r io.Reader, dst **T) error {
	var v T
	dec := jsonstream.NewDecoder(r)
	if err := dec.Decode(&v); err != nil {
		return err
	}
	*dst = &v
	return jsonstream.EndOfInput(dec)
}
