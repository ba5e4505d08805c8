package mountprobe

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors"
)

// Writing mountprobe's report: probes.json streamed, summary.txt.

// writeReport writes probes.json (or, with another writer, the
// summary) one probe at a time: encoded whole, the report of 30,000
// mounts took 12 MB, and json's buffers and the indentation three times
// that, which made mountprobe's peak.
func writeReport(env *collectors.Env, name string, rep *layout.MountProbeReport, probes []*layout.MountProbe, write ...func(io.Writer, *layout.MountProbeReport, []*layout.MountProbe) error) error {
	f, err := env.Create(name)
	if err != nil {
		return err
	}
	enc := encodeReport
	if len(write) > 0 {
		enc = write[0]
	}
	werr := enc(f, rep, probes)
	cerr := f.Close()
	if werr != nil {
		return fmt.Errorf("writing %s: %w", name, werr)
	}
	return cerr
}

// encodeReport writes rep as indented JSON with probes as its Probes,
// last and one at a time.
func encodeReport(w io.Writer, rep *layout.MountProbeReport, probes []*layout.MountProbe) error {
	// The outer Probes, nil and omitted, hides the report's own.
	head, err := json.MarshalIndent(struct {
		*layout.MountProbeReport
		Probes *int `json:"probes,omitempty"`
	}{MountProbeReport: rep}, "", "  ")
	if err != nil {
		return err
	}
	head = bytes.TrimSuffix(bytes.TrimRight(head, "\n"), []byte("\n}"))
	bw := bufio.NewWriterSize(w, 64<<10)
	bw.Write(head)
	bw.WriteString(",\n  \"probes\": [")
	for i, p := range probes {
		b, err := json.MarshalIndent(p, "    ", "  ")
		if err != nil {
			return err
		}
		if i > 0 {
			bw.WriteByte(',')
		}
		bw.WriteString("\n    ")
		bw.Write(b)
	}
	if len(probes) > 0 {
		bw.WriteString("\n  ")
	}
	bw.WriteString("]\n}\n")
	return bw.Flush()
}

func round1(f float64) float64 { return float64(int64(f*10+0.5)) / 10 }

// writeSummary writes summary.txt.
func writeSummary(w io.Writer, r *layout.MountProbeReport, probes []*layout.MountProbe) error {
	b := bufio.NewWriterSize(w, 64<<10)
	fmt.Fprintf(b, "mountprobe: %d distinct mounts in %d mount namespace(s), probed in %.2fs (probe deadline %s, %d-%d workers)\n",
		len(probes), len(r.Namespaces), r.DurationMS/1000, time.Duration(r.ProbeTimeoutMS)*time.Millisecond, r.Workers, r.MaxWorkers)
	keys := []string{layout.ProbeOK, layout.ProbeHung, layout.ProbeError, layout.ProbeSkipped, layout.ProbeUnfinished}
	var parts []string
	for _, k := range keys {
		if n := r.Counts[k]; n > 0 || k == layout.ProbeOK || k == layout.ProbeHung || k == layout.ProbeError {
			parts = append(parts, fmt.Sprintf("%s %d", k, n))
		}
	}
	fmt.Fprintf(b, "results: %s\n", strings.Join(parts, ", "))
	for _, n := range r.Notes {
		fmt.Fprintf(b, "note: %s\n", n)
	}
	section := func(title, result string) {
		first := true
		for _, p := range probes {
			if p.Result != result {
				continue
			}
			if first {
				fmt.Fprintf(b, "\n%s\n", title)
				first = false
			}
			fmt.Fprintf(b, "  %s  [%s %s %s dev %s, ns %d]\n", p.ProbePath, p.Class, p.FSType, p.Source, p.Dev, p.ProbeNamespace)
			if p.Errno != "" || p.Error != "" {
				fmt.Fprintf(b, "      error: %s %s\n", p.Errno, p.Error)
			}
			if p.Diagnosis != "" {
				fmt.Fprintf(b, "      %s\n", p.Diagnosis)
			}
			if p.BlockedIn != "" {
				fmt.Fprintf(b, "      blocked: %s\n", p.BlockedIn)
			}
			if p.FUSE != nil {
				fmt.Fprintf(b, "      fuse connection %d: waiting before %s, after %s\n", p.FUSE.Conn, intOrUnknown(p.FUSE.WaitingBefore), intOrUnknown(p.FUSE.WaitingAfter))
			}
			if p.SkipReason != "" {
				fmt.Fprintf(b, "      %s\n", p.SkipReason)
			}
		}
	}
	section("HUNG (later collectors do not touch these paths):", layout.ProbeHung)
	section("ERRORS:", layout.ProbeError)
	section("UNFINISHED:", layout.ProbeUnfinished)
	fmt.Fprintf(b, "\nALL MOUNTS (network, fuse, block, local, pseudo):\n")
	fmt.Fprintf(b, "  %-10s %9s  %-7s %-16s %-9s %s\n", "RESULT", "LATENCY", "CLASS", "FSTYPE", "DEV", "MOUNTPOINT")
	for _, p := range probes {
		lat := "-"
		if p.Probed || p.Result == layout.ProbeHung && p.KernelStuck == nil {
			lat = fmt.Sprintf("%.2fms", p.LatencyMS)
		}
		res := p.Result
		if p.Errno != "" {
			res += " " + p.Errno
		}
		fmt.Fprintf(b, "  %-10s %9s  %-7s %-16s %-9s %s", res, lat, p.Class, p.FSType, p.Dev, p.ProbePath)
		if n := len(p.Namespaces); n > 1 {
			fmt.Fprintf(b, "  (in %d namespaces)", n)
		}
		b.WriteByte('\n')
	}
	return b.Flush()
}

func intOrUnknown(p *int) string {
	if p == nil {
		return "unknown"
	}
	return strconv.Itoa(*p)
}
