package storageclients

import (
	"strconv"
	"strings"

	"github.com/nodesnap/nodesnap/bundle/layout"
)

// The kernel ceph client's debugfs files (net/ceph/debugfs.c and
// fs/ceph/debugfs.c): osdc lists in-flight OSD requests, one a line,
// tab-separated, "tid osdN pool.seed [spgid] [up]/p [acting]/p [eN] oid
// 0xflags [P] attempts [replay] ops"; the fields between the PG and the
// object changed between kernels, so the parser keys on shapes (osdN,
// 0x flags) rather than positions. mdsc lists in-flight MDS requests,
// "tid mdsN op ...", or "(no request)"/"(no session)" instead of mdsN.

// ParseCephOSDC reads osdc: the requests of "REQUESTS" (and "LINGER
// REQUESTS", marked Linger) sections. BACKOFFS and other sections are
// skipped.
func ParseCephOSDC(b []byte) []layout.CephOSDRequest {
	var out []layout.CephOSDRequest
	linger := false
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, "LINGER REQUESTS"):
			linger = true
			continue
		case strings.HasPrefix(line, "REQUESTS"):
			linger = false
			continue
		case strings.HasPrefix(line, "BACKOFFS"):
			linger = false
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) < 3 || len(out) >= maxRecords {
			continue
		}
		tid, err := strconv.ParseUint(strings.TrimSpace(f[0]), 10, 64)
		if err != nil {
			continue
		}
		osdText, ok := strings.CutPrefix(f[1], "osd")
		if !ok {
			continue
		}
		osd, err := strconv.Atoi(osdText)
		if err != nil {
			continue
		}
		r := layout.CephOSDRequest{TID: tid, OSD: osd, PG: f[2], Linger: linger}
		// The object name sits just before the 0x flags; attempts just
		// after them (after "P" when the request is paused).
		for i := 3; i < len(f); i++ {
			if !strings.HasPrefix(f[i], "0x") || i == 3 {
				continue
			}
			r.Object = f[i-1]
			j := i + 1
			if j < len(f) && f[j] == "P" {
				r.Paused = true
				j++
			}
			if j < len(f) {
				if n, err := strconv.Atoi(f[j]); err == nil {
					r.Attempts = n
					j++
				}
			}
			// What remains: an optional replay version (e'v), then ops.
			for ; j < len(f); j++ {
				if strings.Contains(f[j], "'") {
					continue
				}
				r.Ops = f[j]
				break
			}
			break
		}
		out = append(out, r)
	}
	return out
}

// ParseCephMDSC reads mdsc.
func ParseCephMDSC(b []byte) []layout.CephMDSRequest {
	var out []layout.CephMDSRequest
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Split(line, "\t")
		if len(f) < 3 || len(out) >= maxRecords {
			continue
		}
		tid, err := strconv.ParseUint(strings.TrimSpace(f[0]), 10, 64)
		if err != nil {
			continue
		}
		r := layout.CephMDSRequest{TID: tid, MDS: -1, Op: strings.TrimSpace(f[2])}
		if v, ok := strings.CutPrefix(f[1], "mds"); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				continue
			}
			r.MDS = n
		} else if !strings.HasPrefix(f[1], "(no ") {
			continue
		}
		if len(f) > 4 {
			r.Path = strings.TrimSpace(f[4])
		}
		out = append(out, r)
	}
	return out
}

// lines splits a small text file into at most max non-empty lines.
func lines(b []byte, max int) []string {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimRight(l, " \t\r"); l == "" {
			continue
		}
		if len(out) >= max {
			break
		}
		out = append(out, l)
	}
	return out
}
