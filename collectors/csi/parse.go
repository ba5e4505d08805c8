package csi

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/nodesnap/nodesnap/bundle/layout"
)

// Parsers of CSI drivers' and the kubelet's files: driver state, vol_data.json, pod log directory and file names.

// csiSafeName makes one path element safe as a bundle file name.
func csiSafeName(s string) string {
	if s == "" || s == "." || s == ".." {
		return "_"
	}
	b := []byte(s)
	for i, ch := range b {
		ok := ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || strings.IndexByte("._-~+@:=", ch) >= 0
		if !ok {
			b[i] = '_'
		}
	}
	return string(b)
}

func csiSafeRel(rel string) string {
	parts := strings.Split(rel, "/")
	out := parts[:0]
	for _, p := range parts {
		if p != "" {
			out = append(out, csiSafeName(p))
		}
	}
	if len(out) == 0 {
		return "_"
	}
	return strings.Join(out, "/")
}

// CSIState is what ParseCSIState understood of a state file.
type CSIState struct {
	Format    string
	Volumes   []layout.CSIStateVolume
	Snapshots int
}

// ParseCSIState decodes a CSI driver's state file. It knows
// csi-driver-host-path's layout ({"Volumes": [...], "Snapshots": [...]},
// Go field names as keys); other JSON is "json", anything else "invalid"
// with the error. It never panics on bad input.
func ParseCSIState(data []byte) (CSIState, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		var v json.RawMessage
		if json.Unmarshal(data, &v) == nil {
			return CSIState{Format: "json"}, nil
		}
		return CSIState{Format: "invalid"}, fmt.Errorf("not valid JSON: %w", err)
	}
	rawVols, ok := csiField(top, "Volumes")
	if !ok {
		return CSIState{Format: "json"}, nil
	}
	st := CSIState{Format: "csi-hostpath"}
	var vols []map[string]json.RawMessage
	if string(rawVols) != "null" {
		if err := json.Unmarshal(rawVols, &vols); err != nil {
			return CSIState{Format: "invalid"}, fmt.Errorf("\"Volumes\" is not a list of objects: %w", err)
		}
	}
	for _, v := range vols {
		sv := layout.CSIStateVolume{
			VolID: csiStr(v, "VolID"), VolName: csiStr(v, "VolName"), VolPath: csiStr(v, "VolPath"),
			NodeID: csiStr(v, "NodeID"), Kind: csiStr(v, "Kind"),
		}
		sv.PublishedState, sv.Published = csiPaths(v, "Published")
		sv.StagedState, sv.Staged = csiPaths(v, "Staged")
		st.Volumes = append(st.Volumes, sv)
	}
	if rawSnaps, ok := csiField(top, "Snapshots"); ok {
		var snaps []json.RawMessage
		if json.Unmarshal(rawSnaps, &snaps) == nil {
			st.Snapshots = len(snaps)
		}
	}
	return st, nil
}

// csiField finds a key as encoding/json would (exact, else any case).
func csiField(m map[string]json.RawMessage, key string) (json.RawMessage, bool) {
	if v, ok := m[key]; ok {
		return v, true
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if strings.EqualFold(k, key) {
			return m[k], true
		}
	}
	return nil, false
}

func csiStr(m map[string]json.RawMessage, key string) string {
	raw, ok := csiField(m, key)
	if !ok {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return strings.TrimSpace(string(raw))
}

// csiPaths classifies a Published/Staged value: the driver's restart bug
// of incident 004 left "Published": null.
func csiPaths(m map[string]json.RawMessage, key string) (string, []string) {
	raw, ok := csiField(m, key)
	if !ok {
		return "missing", nil
	}
	t := strings.TrimSpace(string(raw))
	switch t {
	case "null":
		return "null", nil
	case "false":
		return "false", nil
	case "[]", `""`:
		return "empty", nil
	}
	var list []string
	if json.Unmarshal(raw, &list) == nil {
		if len(list) == 0 {
			return "empty", nil
		}
		return "set", list
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return "set", []string{one}
	}
	return "other", nil
}

// ParseVolData decodes a kubelet vol_data.json: a flat JSON object of
// strings.
func ParseVolData(data []byte) (layout.CSIVolData, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return layout.CSIVolData{}, fmt.Errorf("vol_data.json is not a JSON object: %w", err)
	}
	return layout.CSIVolData{
		DriverName:          csiStr(m, "driverName"),
		VolumeHandle:        csiStr(m, "volumeHandle"),
		SpecVolID:           csiStr(m, "specVolID"),
		NodeName:            csiStr(m, "nodeName"),
		AttachmentID:        csiStr(m, "attachmentID"),
		VolumeLifecycleMode: csiStr(m, "volumeLifecycleMode"),
	}, nil
}

// PodLogDirName is a pod's log directory name, <namespace>_<pod>_<uid>.
type PodLogDirName struct {
	Namespace string
	Pod       string
	UID       string
}

// ParsePodLogDirName parses a directory name of the kubelet's pod log
// directory. The namespace must be a DNS label and the pod name a DNS
// subdomain, as Kubernetes requires (neither holds "_"); the UID is
// letters, digits and dashes (a UUID, or a static pod's hash). It never
// panics on bad input.
func ParsePodLogDirName(name string) (PodLogDirName, error) {
	parts := strings.Split(name, "_")
	if len(parts) != 3 {
		return PodLogDirName{}, fmt.Errorf("%q is not a pod log directory name: not namespace_pod-name_pod-uid", name)
	}
	d := PodLogDirName{Namespace: parts[0], Pod: parts[1], UID: parts[2]}
	switch {
	case !isDNSName(d.Namespace, 63, false):
		return PodLogDirName{}, fmt.Errorf("%q is not a pod log directory name: %q is not a namespace name", name, d.Namespace)
	case !isDNSName(d.Pod, 253, true):
		return PodLogDirName{}, fmt.Errorf("%q is not a pod log directory name: %q is not a pod name", name, d.Pod)
	case !isPodUID(d.UID):
		return PodLogDirName{}, fmt.Errorf("%q is not a pod log directory name: %q is not a pod UID", name, d.UID)
	}
	return d, nil
}

// isDNSName checks a DNS-1123 label (lowercase letters, digits, '-',
// starting and ending with a letter or digit), or with dots a subdomain
// (dot-separated labels).
func isDNSName(s string, max int, dots bool) bool {
	if s == "" || len(s) > max {
		return false
	}
	labels := []string{s}
	if dots {
		labels = strings.Split(s, ".")
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for i := 0; i < len(l); i++ {
			ch := l[i]
			if !(ch >= 'a' && ch <= 'z' || ch >= '0' && ch <= '9' || ch == '-') {
				return false
			}
		}
	}
	return true
}

func isPodUID(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '-') {
			return false
		}
	}
	return true
}

// PodLogFileName is a container log file's name: the live <restart>.log, a
// rotated <restart>.log.<time>, or a compressed <restart>.log.<time>.gz.
type PodLogFileName struct {
	Restart int
	// Rotation is the rotated part's time stamp ("" for the live file).
	Rotation   string
	Compressed bool
}

// ParsePodLogFileName parses a container log file's name; ok is false for
// anything else (the kubelet's ".tmp" files while it compresses, names of
// other programs). It never panics on bad input.
func ParsePodLogFileName(name string) (PodLogFileName, bool) {
	num, rest, ok := strings.Cut(name, ".log")
	if !ok || num == "" || len(num) > 9 || (num[0] == '0' && len(num) > 1) {
		return PodLogFileName{}, false
	}
	n := 0
	for i := 0; i < len(num); i++ {
		if num[i] < '0' || num[i] > '9' {
			return PodLogFileName{}, false
		}
		n = n*10 + int(num[i]-'0')
	}
	if rest == "" {
		return PodLogFileName{Restart: n}, true
	}
	stamp, ok := strings.CutPrefix(rest, ".")
	if !ok {
		return PodLogFileName{}, false
	}
	f := PodLogFileName{Restart: n}
	stamp, f.Compressed = strings.CutSuffix(stamp, ".gz")
	if stamp == "" || stamp == "gz" || stamp == "tmp" || len(stamp) > 64 || strings.HasSuffix(stamp, ".tmp") {
		return PodLogFileName{}, false
	}
	for i := 0; i < len(stamp); i++ {
		ch := stamp[i]
		if !(ch >= '0' && ch <= '9' || ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch == '-' || ch == '.' || ch == '_') {
			return PodLogFileName{}, false
		}
	}
	f.Rotation = stamp
	return f, true
}
