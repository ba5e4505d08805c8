package journal

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"syscall"
	"time"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors/hostfs"
	"github.com/nodesnap/nodesnap/engine/isolate"
	"github.com/nodesnap/nodesnap/internal/human"
)

// The /var/log fallback: plain log files' newest bytes when journald is absent or unreadable.

// fallbacks reads what the journal did not give: everything when journald
// is unusable, else only the subjects whose journal source came back empty
// or failed (a kubelet logging to /var/log/kubelet.log or, on RKE2, to
// /var/lib/rancher/rke2/agent/logs/kubelet.log; k3s's and RKE2's own
// containerd logging to a file; a journald that does not read the
// kernel log).
func (j *journalRun) fallbacks(ctx context.Context, usable bool) {
	need := func(subject string) bool {
		if subject == "kernel" && !j.o.Kernel {
			// --journal-kernel=false holds whatever the source.
			return false
		}
		if !usable {
			return true
		}
		switch subject {
		case "kernel":
			return j.o.Kernel && !j.subject["kernel"]
		case "kubelet":
			return j.wantsUnit("kubelet") && !j.subject["kubelet"]
		case "containerd":
			return j.wantsUnit("containerd") && !j.subject["containerd"]
		}
		return false
	}
	files := []struct{ name, path, subject string }{
		{"messages", "/var/log/messages", "system"},
		{"syslog", "/var/log/syslog", "system"},
		// syslog's daemon facility, where a syslog setup keeps the storage
		// daemons (multipathd, iscsid, rpc.statd) apart from messages.
		{"daemon.log", "/var/log/daemon.log", "system"},
		{"kern.log", "/var/log/kern.log", "kernel"},
		{"kubelet.log", "/var/log/kubelet.log", "kubelet"},
		// RKE2 runs the kubelet as a process of its own that logs to a
		// file (--log-file), not to the journal: without it an RKE2
		// node has no kubelet log at all.
		{"rke2-kubelet.log", "/var/lib/rancher/rke2/agent/logs/kubelet.log", "kubelet"},
		// k3s and RKE2 run their own containerd, which logs to a file
		// (not the journal): a container's rootfs or sandbox removal
		// failing is only there.
		{"k3s-containerd.log", "/var/lib/rancher/k3s/agent/containerd/containerd.log", "containerd"},
		{"rke2-containerd.log", "/var/lib/rancher/rke2/agent/containerd/containerd.log", "containerd"},
	}
	for _, f := range files {
		if need(f.subject) {
			j.idx.Sources = append(j.idx.Sources, j.logWithRotations(ctx, f.name, f.path)...)
		}
	}
	if need("kernel") {
		j.idx.Sources = append(j.idx.Sources, j.kernelRing(ctx))
	}
}

func (j *journalRun) wantsUnit(base string) bool {
	for _, u := range j.o.Units {
		if strings.TrimSuffix(u, ".service") == base {
			return true
		}
	}
	return false
}

// fileReadChunk is how much of a log file one worker op reads: small
// enough to finish well within the probe deadline on a slow disk.
const fileReadChunk = 1 << 20

// fileTail copies the newest part of a log file, at most budget bytes,
// read from its end in bounded chunks by a worker (the file may sit on a
// mount that hangs), into the bundle file named file.
func (j *journalRun) fileTail(ctx context.Context, name, hostPath, file string, budget int64) layout.JournalSource {
	hp := hostfs.Path(hostPath)
	p := j.env.Host().Seen(hp)
	s := layout.JournalSource{Name: name, Kind: "file", Path: hostPath}
	start := time.Now()
	defer func() { s.DurationSeconds = time.Since(start).Seconds() }()
	var st journalReadResult
	if err := j.env.Host().Do(ctx, 0, opJournalReadAt, hp, journalReadRequest{Path: p, Off: -1}, &st); err != nil {
		if errors.Is(err, hostfs.ErrHung) {
			s.Status, s.Error = layout.JournalSkipped, "on a mount found hung earlier in this run"
			return s
		}
		if errors.Is(err, syscall.ENOENT) {
			s.Status = layout.JournalMissing
			return s
		}
		s.Status, s.Error = layout.JournalError, err.Error()
		if errors.Is(err, isolate.ErrTimeout) {
			s.Status = layout.JournalTimeout
		}
		return s
	}
	s.SourceBytes = st.Size
	if st.Size == 0 {
		s.Status = layout.JournalEmpty
		return s
	}
	if budget <= 0 {
		s.Status, s.Error = layout.JournalSkipped, "the collector's byte cap was reached"
		return s
	}
	off := max(0, st.Size-budget)
	skipFirst := off > 0
	f, err := j.env.Create(file)
	if err != nil {
		s.Status, s.Error = layout.JournalError, err.Error()
		return s
	}
	s.File = file
	s.Status = layout.JournalOK
	var lastLine []byte
	for off < st.Size {
		if ctx.Err() != nil {
			s.Status, s.Error = layout.JournalTimeout, "the collector's deadline was reached while copying"
			break
		}
		n := min(int64(fileReadChunk), st.Size-off)
		var r journalReadResult
		if err := j.env.Host().Do(ctx, 0, opJournalReadAt, hp, journalReadRequest{Path: p, Off: off, Len: n}, &r); err != nil {
			s.Status, s.Error = layout.JournalError, err.Error()
			if errors.Is(err, isolate.ErrTimeout) {
				s.Status = layout.JournalTimeout
			}
			break
		}
		data := r.Data
		off += int64(len(data))
		if skipFirst {
			// The window starts mid-line: the partial first line goes.
			i := bytes.IndexByte(data, '\n')
			if i < 0 {
				continue
			}
			data = data[i+1:]
			skipFirst = false
		}
		if len(data) > 0 {
			if s.Oldest == "" {
				s.Oldest = firstField(data)
			}
			s.Entries += bytes.Count(data, []byte{'\n'})
			s.Bytes += int64(len(data))
			lastLine = lastLineOf(data, lastLine)
			if _, err := f.Write(data); err != nil {
				s.Status, s.Error = layout.JournalError, err.Error()
				break
			}
		}
		if int64(len(r.Data)) < n {
			j.env.Notef("%s shrank while it was read (rotated?); kept what was read", hostPath)
			break
		}
	}
	s.Newest = firstField(lastLine)
	if st.Size > budget {
		s.Truncated = true
		f.MarkTruncated()
		j.env.Notef("%s: kept the newest %s of %s (%s cap)", file, human.Bytes(s.Bytes), human.Bytes(st.Size), human.Bytes(budget))
	}
	if err := f.Close(); err != nil && s.Status == layout.JournalOK {
		s.Status, s.Error = layout.JournalError, err.Error()
	}
	if s.Bytes > 0 {
		j.written = true
	}
	return s
}

// lastLineOf returns the last complete line in data, or prev when data
// holds none (bounded: only the line's head is kept).
func lastLineOf(data, prev []byte) []byte {
	d := bytes.TrimRight(data, "\n")
	if len(d) == 0 {
		return prev
	}
	i := bytes.LastIndexByte(d, '\n')
	line := d[i+1:]
	return append([]byte(nil), line[:min(len(line), 64)]...)
}
