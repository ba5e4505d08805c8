package kubelet

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"sort"
	"strings"

	"github.com/nodesnap/nodesnap/redact"
)

// What the kubelet collector removes from answers before they reach the bundle: pods' secret values and the run's own token.

// Rules under which the kubelet collector's own replacements are counted
// in the manifest's redaction report.
const (
	// RedactionPodEnv: environment variable values and last-applied
	// configurations removed from the pods answer.
	RedactionPodEnv = "kubelet_pod_env"
	// RedactionKubeletToken: the run's own kubelet token echoed back.
	RedactionKubeletToken = "kubelet_token"
)

// scrub removes the token from a string bound for the manifest. The
// redactor catches "Bearer <token>"; this catches the bare value, should a
// server or an error message ever echo it.
func (k *kubeletRun) scrub(s string) string {
	if k.token == "" {
		return s
	}
	return strings.ReplaceAll(s, k.token, redact.Marker)
}

// RedactPodSecrets removes environment variable values and the
// last-applied-configuration annotation (a copy of the whole spec, env
// included) from the kubelet's /pods answer and returns it indented.
// Names stay, so "which variables were set" survives; values do not.
func RedactPodSecrets(data []byte) ([]byte, int, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, 0, err
	}
	if dec.More() {
		return nil, 0, errors.New("trailing data after the JSON value")
	}
	n := kubeletRedactPodValue(v, "")
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, 0, err
	}
	return buf.Bytes(), n, nil
}

// PodEnv returns the pods' environment variables in the kubelet's /pods
// answer as "NAME=value" (entries with a literal value only), for the
// run's last pass: RedactPodSecrets drops the values from pods.json, but a
// driver may print one bare in its log. Not JSON: none.
func PodEnv(data []byte) []string {
	var v any
	if json.Unmarshal(data, &v) != nil {
		return nil
	}
	var out []string
	var walk func(v any, key string)
	walk = func(v any, key string) {
		switch t := v.(type) {
		case map[string]any:
			if key == "env" {
				name, _ := t["name"].(string)
				if val, ok := t["value"].(string); ok && name != "" && val != "" {
					out = append(out, name+"="+val)
				}
				return
			}
			for ck, cv := range t {
				walk(cv, ck)
			}
		case []any:
			for _, e := range t {
				walk(e, key)
			}
		}
	}
	walk(v, "")
	return out
}

func kubeletRedactPodValue(v any, key string) int {
	n := 0
	switch t := v.(type) {
	case map[string]any:
		if key == "annotations" {
			for ak := range t {
				if ak == "kubectl.kubernetes.io/last-applied-configuration" {
					t[ak] = redact.Marker
					n++
				}
			}
		}
		keys := make([]string, 0, len(t))
		for ck := range t {
			keys = append(keys, ck)
		}
		sort.Strings(keys)
		for _, ck := range keys {
			if key == "env" && ck == "value" {
				if s, ok := t[ck].(string); ok && s != "" {
					t[ck] = redact.Marker
					n++
				}
				continue
			}
			n += kubeletRedactPodValue(t[ck], ck)
		}
	case []any:
		for _, e := range t {
			// Elements of an "env" array are the {name, value} objects.
			n += kubeletRedactPodValue(e, key)
		}
	}
	return n
}

// kubeletScrubber replaces every occurrence of one secret in a stream,
// holding back at most len(secret)-1 bytes so that a secret split across
// writes is still found.
type kubeletScrubber struct {
	w       io.Writer
	needle  []byte
	pending []byte
	count   int
}

func newKubeletScrubber(w io.Writer, secret string) *kubeletScrubber {
	return &kubeletScrubber{w: w, needle: []byte(secret)}
}

func (s *kubeletScrubber) Write(p []byte) (int, error) {
	if len(s.needle) == 0 {
		return s.w.Write(p)
	}
	s.pending = append(s.pending, p...)
	for {
		i := bytes.Index(s.pending, s.needle)
		if i < 0 {
			break
		}
		if _, err := s.w.Write(s.pending[:i]); err != nil {
			return 0, err
		}
		if _, err := io.WriteString(s.w, redact.Marker); err != nil {
			return 0, err
		}
		s.count++
		s.pending = s.pending[i+len(s.needle):]
	}
	if keep := len(s.needle) - 1; len(s.pending) > keep {
		cut := len(s.pending) - keep
		if _, err := s.w.Write(s.pending[:cut]); err != nil {
			return 0, err
		}
		s.pending = append(s.pending[:0], s.pending[cut:]...)
	}
	return len(p), nil
}

// Close writes what was held back.
func (s *kubeletScrubber) Close() error {
	if len(s.pending) == 0 {
		return nil
	}
	_, err := s.w.Write(s.pending)
	s.pending = nil
	return err
}
