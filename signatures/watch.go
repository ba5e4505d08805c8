// Package signatures is the catalogue of log signatures: lines of the
// kubelet's, the container runtime's, CSI drivers' and the kernel's logs
// that name a storage incident. It is a leaf (standard library only),
// shared by the two sides that read logs: analyze, which reads a bundle's
// logs offline, and watch, which tests lines on a live node as they are
// written. Neither imports the other.
package signatures

import (
	"bytes"
	"regexp"
	"strings"
)

// Sig is one signature.
type Sig struct {
	// ID names the signature (e.g. "teardown-busy").
	ID string
	// Needles: the line must contain all of them (each may list
	// alternatives separated by "|"). They are tested before Re (cheap).
	Needles []string
	// Re extracts the key from the line (the first group that matched);
	// nil or no match keys the hit by "".
	Re *regexp.Regexp
	// Unless: a line containing any of these belongs to a more specific
	// signature.
	Unless []string
	// Trace keeps the lines after a hit that continue it (a kernel call
	// trace).
	Trace bool
}

// One regular expression per signature: the key is the first group that
// matched. Quotes may be escaped (klog prints `\"` inside quoted errors).
var Catalogue = []Sig{
	{ID: "teardown-busy", Needles: []string{"TearDown", "resource busy"},
		Re: regexp.MustCompile(`UniqueName: \\*"([^"\\]+)`)},
	{ID: "unmount-device-failed", Needles: []string{"UnmountDevice failed|unmap failed|failed to unmap"}, Unless: []string{"still mounted by other references"},
		Re: regexp.MustCompile(`UniqueName: \\*"([^"\\]+)|failed to unmap device (/dev/[A-Za-z0-9]+)`)},
	{ID: "pod-volumes-not-cleaned-up", Needles: []string{"some volumes have not been cleaned up"},
		Re: regexp.MustCompile(`podUID=\\*"?([0-9a-fA-F-]{36})|pod \\*"?([0-9a-fA-F-]{36})|pod=\\*"([^"\\]+)`)},
	{ID: "orphaned-pod-volume-paths", Needles: []string{"orphaned pod", "volume paths are still present"},
		Re: regexp.MustCompile(`orphaned pod \\*"([^"\\]+)`)},
	// kubelet ≥ 1.26 after a CSI target was unmounted by hand, its
	// vol_data.json left: `orphaned pod "<uid>" found, but error occurred
	// when trying to remove the volumes dir: not a directory`, every 2 s.
	{ID: "orphaned-pod-volumes-dir-not-removed", Needles: []string{"orphaned pod", "trying to remove the volumes dir"},
		Re: regexp.MustCompile(`orphaned pod \\*"([^"\\]+)`)},
	// Evidence only (a normal line): kubelet ≥ 1.26 logs it for a CSI
	// volume whose target is still a mount, removing nothing.
	{ID: "teardown-succeeded", Needles: []string{"UnmountVolume.TearDown succeeded"},
		Re: regexp.MustCompile(`for volume \\*"([^"\\]+)`)},
	{ID: "rmdir-volume-busy", Needles: []string{"failed to rmdir() volume at path", "busy"},
		Re: regexp.MustCompile(`(/\S*?/pods/[0-9a-fA-F-]{36})/volumes`)},
	// A kubelet logs "PLEG is not healthy: pleg has yet to be successful"
	// in the first seconds of every start, before its first relist: not a
	// stuck PLEG (seen on a real v1.34 kubelet at each start).
	{ID: "pleg-unhealthy", Needles: []string{"PLEG is not healthy"}, Unless: []string{"pleg has yet to be successful"}},
	{ID: "syncloop-slow", Needles: []string{"sync Loop took longer than expected|syncloop failed|syncLoop is not healthy"}},
	{ID: "csi-operation-exists", Needles: []string{"operation with the given Volume ID"},
		Re: regexp.MustCompile(`Volume ID ([^\s"\\]+) already exists`)},
	{ID: "still-mounted-by-other-references", Needles: []string{"is still mounted by other references"},
		Re: regexp.MustCompile(`device mount path \\*"([^"\\]+)`)},
	{ID: "unlinkat-busy", Needles: []string{"unlinkat ", "resource busy"},
		Re: regexp.MustCompile(`unlinkat (/[^\s:"\\]+)`)},
	{ID: "kernel-hung-task", Needles: []string{"blocked for more than"}, Trace: true,
		Re: regexp.MustCompile(`task (\S+?:\d+) blocked for more than`)},
	{ID: "libceph-session-lost", Needles: []string{"libceph", "session lost"},
		Re: regexp.MustCompile(`libceph: (mon\d+ \S+)`)},
	{ID: "nfs-not-responding", Needles: []string{"nfs: server", "not responding"},
		Re: regexp.MustCompile(`nfs: server (\S+) not responding`)},
	{ID: "nfs-ok", Needles: []string{"nfs: server", " OK"},
		Re: regexp.MustCompile(`nfs: server (\S+) OK`)},
	{ID: "transport-not-connected", Needles: []string{"ransport endpoint is not connected"},
		Re: regexp.MustCompile(`(/[^\s:"'\\]+)[\s"'\\]*:\s*[Tt]ransport endpoint is not connected`)},
	// csi-driver-host-path logs `Volume %q is not published at %q,
	// nothing to do.` (some versions "volume"), from its own container.
	{ID: "csi-not-published", Needles: []string{"is not published at", "nothing to do"},
		Re: regexp.MustCompile(`[Vv]olume \\*"([^"\\]+)\\*" is not published`)},
	// A driver's line about an unpublish call, keyed by the volume when
	// the line names it: `NodeUnpublishVolume: called with args
	// {VolumeId:vol-0a1b ...}`, `"volume_id":"..."`, ceph-csi's `Req-ID:`.
	{ID: "csi-node-unpublish", Needles: []string{"NodeUnpublishVolume"},
		Re: regexp.MustCompile(`(?:volume_id|[Vv]olume[Ii][Dd]|Req-ID)\\*"?\s*[:=]\s*\\*"?([^\s"\\,}\]]+)`)},
	{ID: "deleting-dir", Needles: []string{".deleting~"},
		Re: regexp.MustCompile(`(/[^\s"\\]*?)\.deleting~`)},
}

// Matches tells whether line holds every needle of s and none of its
// exceptions.
func (s *Sig) Matches(line []byte) bool {
	for _, nd := range s.Needles {
		if !matchNeedle(line, nd) {
			return false
		}
	}
	for _, u := range s.Unless {
		if bytes.Contains(line, []byte(u)) {
			return false
		}
	}
	return true
}

func matchNeedle(line []byte, needle string) bool {
	if !strings.Contains(needle, "|") {
		return bytes.Contains(line, []byte(needle))
	}
	for _, alt := range strings.Split(needle, "|") {
		if bytes.Contains(line, []byte(alt)) {
			return true
		}
	}
	return false
}

// LineSignature is a signature of the catalogue that one line matches:
// its ID (e.g. "teardown-busy", "nfs-not-responding") and its key (the
// volume, server or task the line names; "" when the signature has none).
type LineSignature struct {
	ID  string
	Key string
}

// MatchLine tests one log line against the catalogue and keeps nothing:
// for `nodesnap watch`, which tests lines as the kubelet, the runtime and
// the kernel write them. The line is a single line without its newline,
// of any length (the caller bounds it).
func MatchLine(line []byte) []LineSignature {
	var out []LineSignature
	for i := range Catalogue {
		sig := &Catalogue[i]
		if !sig.Matches(line) {
			continue
		}
		ls := LineSignature{ID: sig.ID}
		if sig.Re != nil {
			if m := sig.Re.FindSubmatch(line); m != nil {
				for _, g := range m[1:] {
					if len(g) > 0 {
						ls.Key = string(g)
						break
					}
				}
			}
		}
		out = append(out, ls)
	}
	return out
}
