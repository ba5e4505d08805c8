package events

import "strings"

// Records that reach a bundle cut short or copied out of a wider path:
// a pasted line the thread stops in, a journal's line-length limit, a
// kubelet whose root is not /var/lib/kubelet. What was cut is no object,
// and a path is the whole path the record wrote.

// whole is a field's value when it is complete, "" when the record was
// cut inside it: logfmt keeps an unterminated quoted value with its
// opening quote (its text still says what was logged), but a pod, a
// volume or a UID cut short names another object.
func whole(v string) string {
	if strings.HasPrefix(v, `"`) {
		return ""
	}
	return v
}

// getWhole is get for the fields that name an object.
func (r *record) getWhole(keys ...string) string { return whole(r.get(keys...)) }

// wholePath is the absolute path the record wrote around p, a path the
// catalogue's extractor took from its first known root (/data, /mnt,
// /var/lib ...): in /var/data/kubelet/pods/x or
// /var/snap/microk8s/common/var/lib/kubelet/pods/x that root is not where
// the path begins. The path begins after the nearest byte that cannot be
// in one (a space, a quote, a bracket, '=', ':', ',').
func wholePath(text, p string) string {
	i := strings.Index(text, p)
	if p == "" || i <= 0 || !pathByte(text[i-1]) {
		return p
	}
	j := i
	for j > 0 && pathByte(text[j-1]) {
		j--
	}
	if text[j] != '/' || strings.HasPrefix(text[j:], "//") {
		// Not an absolute path (a word, a URL's host before the root).
		return p
	}
	return text[j:i] + p
}

func pathByte(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("/._-~+@", c) >= 0
}
