package analyze

import "bytes"

// LineSignature is a signature of the log catalogue that one line matches:
// its ID (e.g. "teardown-busy", "nfs-not-responding") and its key (the
// volume, server or task the line names; "" when the signature has none).
type LineSignature struct {
	ID  string
	Key string
}

// MatchLine tests one log line against the catalogue `nodesnap analyze`
// reads logs with, and keeps nothing: for `nodesnap watch`, which tests
// lines as the kubelet, the runtime and the kernel write them. The line
// is a single line without its newline, of any length (the caller bounds
// it).
func MatchLine(line []byte) []LineSignature {
	var out []LineSignature
	for i := range logSigs {
		sig := &logSigs[i]
		ok := true
		for _, nd := range sig.needles {
			if !matchNeedle(line, nd) {
				ok = false
				break
			}
		}
		for _, u := range sig.unless {
			if ok && bytes.Contains(line, []byte(u)) {
				ok = false
			}
		}
		if !ok {
			continue
		}
		ls := LineSignature{ID: sig.id}
		if sig.re != nil {
			if m := sig.re.FindSubmatch(line); m != nil {
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
