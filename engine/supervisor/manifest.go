package supervisor

import (
	"fmt"
	"os"
	"runtime"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/engine/isolate"
	"github.com/nodesnap/nodesnap/engine/outputdir"
	"github.com/nodesnap/nodesnap/redact"
)

// The manifest: what the run decides about the bundle from the results
// and the staged files (caps, files gone or incomplete, cuts, interrupts).

// manifest builds the manifest from the results and the staged files the
// output worker found and hashed. A file a collector reported written but
// that is not in staging any more (the output directory was removed during
// the run) is listed as omitted, and makes its collector and the bundle
// partial: a bundle never says complete while missing what it collected.
func (r *run) manifest(specs []*collectors.Spec, h outputdir.HashResult) *bundle.Manifest {
	end := time.Now()
	m := &bundle.Manifest{
		SchemaVersion:   bundle.SchemaVersion,
		Tool:            bundle.Tool{Name: "nodesnap", Version: r.opts.Version, GoVersion: runtime.Version()},
		CommandLine:     r.opts.CommandLine,
		StartedAt:       r.start.UTC(),
		FinishedAt:      end.UTC(),
		DurationSeconds: end.Sub(r.start).Seconds(),
		Settings: bundle.Settings{
			Root: r.opts.Common.Root, TimeoutSeconds: r.opts.Timeout.Seconds(),
			ProbeTimeoutSeconds: r.opts.Common.ProbeTimeout.Seconds(),
			MaxFileBytes:        r.opts.Common.MaxFileBytes, MaxCollectorBytes: r.opts.Common.MaxCollectorBytes,
			MaxBundleBytes: r.opts.MaxBundleBytes, Concurrency: r.opts.Concurrency,
			SinceSeconds: r.opts.Common.Since.Seconds(), Compression: r.opts.Format,
		},
		Redaction:  bundle.RedactionSummary{Rules: map[string]int{}},
		Collectors: []bundle.CollectorResult{},
		Files:      []bundle.FileEntry{},
		HungMounts: []bundle.HungItem{},
		Omitted:    []bundle.Omitted{},
	}
	if m.CommandLine == nil {
		m.CommandLine = []string{}
	}
	for i, a := range m.CommandLine {
		m.CommandLine[i] = r.redactString(a)
	}
	if m.Tool.Version == "" {
		m.Tool.Version = "dev"
	}
	var uts unix.Utsname
	if unix.Uname(&uts) == nil {
		m.Host.Hostname = unix.ByteSliceToString(uts.Nodename[:])
		m.Host.Kernel = unix.ByteSliceToString(uts.Release[:])
	}
	r.mu.Lock()
	if h := r.facts["hostname"]; h != "" {
		m.Host.Hostname = h
	}
	if k := r.facts["kernel"]; k != "" {
		m.Host.Kernel = k
	}
	if s := r.opts.Redaction; s != nil {
		m.Redaction.Obfuscated = append([]string(nil), s.Options.Obfuscate...)
	}
	if h := m.Host.Hostname; h != "" {
		// With hostname obfuscation on, the manifest and the bundle's
		// name carry the token, like every file does.
		m.Host.Hostname, _ = r.red.String(h)
	}
	m.Host.BootID = r.facts["boot_id"]
	m.Host.MachineID = r.facts["machine_id"]
	m.Interrupted = r.interrupt
	if t := r.opts.Trigger; t != nil {
		// Evidence names mountpoints, pods and hosts: redacted (and
		// obfuscated) like the files that hold the same names.
		tr := *t
		tr.Summary = r.redactString(tr.Summary)
		tr.Evidence = make([]string, len(t.Evidence))
		for i, e := range t.Evidence {
			tr.Evidence[i] = r.redactString(e)
		}
		m.Trigger = &tr
	}
	m.Self = r.opts.Common.Self
	m.HungMounts = append(m.HungMounts, r.hung...)
	r.mu.Unlock()

	var total int64
	var capped []string
	var cut []string
	partial := m.Interrupted != nil
	for _, s := range specs {
		cr := r.results[s.Name]
		switch cr.res.Status {
		case bundle.StatusTimeout, bundle.StatusError, bundle.StatusPartial:
			partial = true
		}
		if cr.cut {
			partial = true
			cut = append(cut, s.Name)
		}
		cappedHere := 0
		found := map[string]bool{}
		for _, hf := range h.Files[s.Name] {
			rel, size, sum := hf.Rel, hf.Size, hf.SHA256
			found[rel] = true
			p := s.Name + "/" + rel
			if r.opts.MaxBundleBytes > 0 && total+size > r.opts.MaxBundleBytes {
				m.Omitted = append(m.Omitted, bundle.Omitted{Path: p, Reason: fmt.Sprintf("the bundle size cap (%d bytes) was reached", r.opts.MaxBundleBytes)})
				capped = append(capped, p)
				cappedHere++
				continue
			}
			total += size
			fe := bundle.FileEntry{Path: p, Collector: s.Name, Size: size, SHA256: sum, Kind: bundle.KindText}
			if rec := cr.records[rel]; rec != nil {
				if rec.Binary {
					fe.Kind, fe.BinaryReason = bundle.KindBinary, rec.BinaryReason
				}
				fe.Truncated = rec.Truncated
				if len(rec.Redactions) > 0 {
					fe.Redactions = rec.Redactions
				}
			} else {
				fe.Incomplete = true
			}
			if hf.Masked > 0 {
				c := make(map[string]int, len(fe.Redactions)+1)
				for k, v := range fe.Redactions {
					c[k] = v
				}
				c[redact.SpreadRule] += hf.Masked
				fe.Redactions = c
			}
			for rule, n := range fe.Redactions {
				m.Redaction.Rules[rule] += n
				m.Redaction.Total += n
			}
			m.Files = append(m.Files, fe)
			cr.res.Files = append(cr.res.Files, p)
		}
		var vanished []string
		for rel, rec := range cr.records {
			switch {
			case rec.Omitted != "":
				m.Omitted = append(m.Omitted, bundle.Omitted{Path: s.Name + "/" + rel, Reason: rec.Omitted})
			case !found[rel]:
				vanished = append(vanished, s.Name+"/"+rel)
				m.Omitted = append(m.Omitted, bundle.Omitted{Path: s.Name + "/" + rel, Reason: "written by the collector, but gone from the staging directory when the bundle was written (the output directory was removed or changed during the run)"})
			}
		}
		if cappedHere > 0 {
			partial = true
			if cr.res.Status == bundle.StatusOK {
				cr.res.Status = bundle.StatusPartial
			}
			msg := fmt.Sprintf("%d file(s) it wrote were left out: the bundle size cap (--max-bundle-size %d bytes) was reached", cappedHere, r.opts.MaxBundleBytes)
			if cr.res.Error == "" {
				cr.res.Error = msg
			} else {
				cr.res.Error += "; " + msg
			}
		}
		if len(vanished) > 0 {
			sort.Strings(vanished)
			partial = true
			if cr.res.Status == bundle.StatusOK {
				cr.res.Status = bundle.StatusPartial
			}
			msg := fmt.Sprintf("%d file(s) it wrote vanished from the staging directory before the bundle was written, first %s", len(vanished), vanished[0])
			if cr.res.Error == "" {
				cr.res.Error = msg
			} else {
				cr.res.Error += "; " + msg
			}
		}
		m.Collectors = append(m.Collectors, cr.res)
	}
	sort.Slice(m.Omitted, func(i, j int) bool { return m.Omitted[i].Path < m.Omitted[j].Path })
	res := &bundle.Resources{}
	res.SupervisorMaxRSSKiB = isolate.OwnPeakRSSKiB()
	for _, c := range m.Collectors {
		res.LargestChildMaxRSSKiB = max(res.LargestChildMaxRSSKiB, c.MaxRSSKiB)
	}
	m.Resources = res
	if len(capped) > 0 {
		sort.Strings(capped)
		m.Warnings = append(m.Warnings, fmt.Sprintf("the bundle size cap (--max-bundle-size %d bytes) was reached: %d file(s) were left out, first %s (the manifest's omitted list names them all)", r.opts.MaxBundleBytes, len(capped), capped[0]))
	}
	if len(cut) > 0 {
		m.Warnings = append(m.Warnings, fmt.Sprintf("cut by --timeout %s: %s did not get the time they needed; collect again with a longer --timeout", r.opts.Timeout, strings.Join(cut, ", ")))
	}
	if uid := os.Geteuid(); uid != 0 {
		m.Warnings = append(m.Warnings, fmt.Sprintf("nodesnap ran as uid %d, not root: other users' process files, kernel stacks, mount namespaces and root-only logs could not be read, so evidence is missing", uid))
		partial = true
	}
	if h.Replaced {
		m.Warnings = append(m.Warnings, "the staging directory "+r.staging.Path+" was removed or replaced during the run (was the output directory deleted?): files written before that are missing, and listed as omitted")
		partial = true
	}
	m.Status = bundle.BundleComplete
	if partial {
		m.Status = bundle.BundlePartial
	}
	return m
}
