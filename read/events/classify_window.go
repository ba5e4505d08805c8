package events

import "strings"

// Two of keysOf's expressions start with a word at a word boundary and
// its separator; on a kubelet's volume records the word is often there
// without its separator ("MountDevice", "volume \"x\""), and the
// expression then ran from every byte of the record. These read the
// record from the byte before the first place a match can start, found
// byte by byte; TestShortcuts holds each equal to its expression.

// volUUIDSubmatch is reVolUUID's first match: a match starts at a
// "volume" after a word boundary, then `\s*=`.
func volUUIDSubmatch(text string) []string {
	for from := 0; ; {
		i := strings.Index(text[from:], "volume")
		if i < 0 {
			return nil
		}
		i += from
		if boundaryBefore(text, i) && sepAt(text, i+len("volume"), false, "=") {
			return reVolUUID.FindStringSubmatch(text[max(i-1, 0):])
		}
		from = i + 1
	}
}

// devKeySubmatch is reDevKey's first match: a match starts at "device",
// "dev" or "disk" in any case after a word boundary, then `["']?\s*[:=]`.
// (?i) folds 's' and 'k' to letters outside ASCII too, so a record with
// any byte outside ASCII is read by the expression whole.
func devKeySubmatch(text string) []string {
	for i := 0; i < len(text); i++ {
		if text[i] >= 0x80 {
			return reDevKey.FindStringSubmatch(text)
		}
	}
	for i := 0; i+3 <= len(text); i++ {
		if text[i]|0x20 != 'd' || !boundaryBefore(text, i) {
			continue
		}
		word := func(w string) bool { return i+len(w) <= len(text) && strings.EqualFold(text[i:i+len(w)], w) }
		if word("device") && sepAt(text, i+6, true, ":=") || word("dev") && sepAt(text, i+3, true, ":=") ||
			word("disk") && sepAt(text, i+4, true, ":=") {
			return reDevKey.FindStringSubmatch(text[max(i-1, 0):])
		}
	}
	return nil
}

// boundaryBefore tells whether \b holds before text[i], a word byte.
func boundaryBefore(text string, i int) bool {
	return i == 0 || !isWordByte(text[i-1])
}

// sepAt tells whether text[j:] starts with an optional quote (when
// quote: " or '), white space (\s), then one of seps. Each part's bytes
// are none of the next part's, so there is one way to read it.
func sepAt(text string, j int, quote bool, seps string) bool {
	if quote && j < len(text) && (text[j] == '"' || text[j] == '\'') {
		j++
	}
	for j < len(text) && strings.IndexByte("\t\n\f\r ", text[j]) >= 0 {
		j++
	}
	return j < len(text) && strings.IndexByte(seps, text[j]) >= 0
}

// isWordByte is \w's byte: an ASCII letter, digit or '_'.
func isWordByte(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_'
}

// podKeySubmatchIndex is rePodKey's first match in text, as
// FindStringSubmatchIndex gives it, for a record all ASCII (ok false
// otherwise: Unicode lowering may move bytes, and the caller reads the
// lowered copy whole). A match starts at "mount" or "pod" in any case
// after a word boundary, then `[-_]?pod` or `[-_]?name`, then
// `["']?\s*[:=]`. On ASCII, rePodKey's (?i) matches the record where it
// matches its lowered copy, at the same bytes.
func podKeySubmatchIndex(text string) (m []int, ok bool) {
	for i := 0; i < len(text); i++ {
		if text[i] >= 0x80 {
			return nil, false
		}
	}
	word := func(i int, w string) bool { return i+len(w) <= len(text) && strings.EqualFold(text[i:i+len(w)], w) }
	dash := func(i int) int {
		if i < len(text) && (text[i] == '-' || text[i] == '_') {
			return i + 1
		}
		return i
	}
	for i := 0; i+3 <= len(text); i++ {
		if c := text[i] | 0x20; c != 'm' && c != 'p' || !boundaryBefore(text, i) {
			continue
		}
		end := -1
		if word(i, "mount") {
			if j := dash(i + 5); word(j, "pod") {
				end = j + 3
			}
		} else if word(i, "pod") {
			if j := dash(i + 3); word(j, "name") {
				end = j + 4
			}
		}
		if end >= 0 && sepAt(text, end, true, ":=") {
			from := max(i-1, 0)
			m := rePodKey.FindStringSubmatchIndex(text[from:])
			for k := range m {
				if m[k] >= 0 {
					m[k] += from
				}
			}
			return m, true
		}
	}
	return nil, true
}
