package redact

import (
	"bytes"
)

// The Writer's multi-line structures decided at the start of a line: YAML
// block scalars, Kubernetes env entries, nested keys and Secret data maps.

// lineStart handles the multi-line structures that are decided at the
// start of a line: YAML block scalars being dropped, a Kubernetes env
// entry's value, Secret data maps and document kinds. It reports true when
// the line was dropped whole.
func (w *Writer) lineStart(line []byte) bool {
	st := &w.st
	if st.scalarIndent >= 0 {
		if blank(line) {
			return true
		}
		if indentOf(line) > st.scalarIndent {
			if isMarkerLine(line) && !st.scalarMarked {
				st.scalarMarked = true // redacted before: keep it as it is
				return false
			}
			if !st.scalarMarked {
				w.markerLine(line)
				w.count(st.scalarRule)
				st.scalarMarked = true
			}
			return true
		}
		st.scalarIndent = -1
	}
	if st.nestCol >= 0 {
		w.nestedLine(line)
	}
	if st.nextLine != nextNone {
		w.nextLineValue(line)
	}
	if st.envIndent >= 0 {
		col := st.envIndent
		st.envIndent = -1
		if ks := keyStart(line); ks == col && hasFoldPrefix(line, ks, "value:") {
			w.p.yamlValue(ks, ks+len("value:"), ruleEnvSecret)
		}
	}
	if st.data != dataNone {
		w.dataLine(line)
	}
	w.structure(line)
	return false
}

// nextLineValue redacts the value a JSON line left for this one (see
// nextKind).
func (w *Writer) nextLineValue(line []byte) {
	st := &w.st
	k := st.nextLine
	st.nextLine = nextNone
	i := indentOf(line)
	if k == nextEnvValue {
		if !hasFoldPrefix(line, i, `"value"`) {
			return
		}
		if i = skipSpace(line, i+len(`"value"`)); i < len(line) && line[i] == ':' {
			w.p.value(skipSpace(line, i+1), ruleEnvSecret, false, 0)
		}
		return
	}
	if i < len(line) && line[i] == '"' && (i+1 >= len(line) || line[i+1] != '-') {
		e := closeQuote(line, i+1, '"')
		if e < 0 {
			e = len(line)
		}
		w.p.valueSpan(i+1, e, st.nextRule, contDQuote)
	}
}

// nestedLine redacts a line below a secret key that had no value of its
// own: a deeper "key: value" loses its value (unless the key names a
// reference: secretName, key, path), a bare continuation line its text. A
// line not deeper than the key ends the nesting.
func (w *Writer) nestedLine(line []byte) {
	st := &w.st
	ts := 0
	if st.nestPrefixed {
		if ts = logPrefixLen(line); ts == 0 {
			st.nestCol = -1
			return
		}
	}
	body := line[ts:]
	if blank(body) {
		return
	}
	ind := indentOf(body)
	if ind <= st.nestCol || body[ind] == '#' {
		if ind <= st.nestCol {
			st.nestCol = -1
		}
		return
	}
	p := &w.p
	ks := keyStart(body)
	ke := ks
	for ke < len(body) && isKeyByte(body[ke]) {
		ke++
	}
	j := skipBlanks(body, ke)
	e := trimRight(body, len(body))
	if ke > ks && j < len(body) && (body[j] == ':' || body[j] == '=') && (j+1 == len(body) || isSpace(body[j+1]) || body[j] == '=') {
		if nestedReference(body[ks:ke]) {
			return
		}
		vs := skipSpace(body, j+1)
		if vs >= e || bytes.Contains(body[vs:e], []byte(Marker)) {
			return // a deeper map (its own lines follow), or redacted before
		}
		if body[vs] == '"' || body[vs] == '\'' {
			if c := bytes.IndexByte(body[vs+1:], body[vs]); c >= 0 {
				p.add(ts+vs+1, ts+vs+1+c, st.nestRule, prioOf(st.nestRule), contNone, Marker)
				return
			}
		}
		p.add(ts+vs, ts+e, st.nestRule, prioOf(st.nestRule), contEOL, Marker)
		return
	}
	if bytes.Contains(body[ind:e], []byte(Marker)) {
		return
	}
	p.add(ts+ind, ts+e, st.nestRule, prioOf(st.nestRule), contEOL, Marker)
}

// nestedReference: keys under a secret key that name where the secret is,
// not what it is (a Kubernetes secret volume's secretName, items' key and
// path).
func nestedReference(key []byte) bool {
	var buf [96]byte
	n := normKey(key, &buf)
	switch string(n) {
	case "key", "items", "optional", "defaultmode", "mode", "name", "namespace":
		return true
	}
	for _, s := range metaSuffixes {
		if hasSuffixStr(n, s) {
			return true
		}
	}
	return false
}

// structure tracks the kind of the current YAML/JSON document and notices
// the start of a Secret's data map.
func (w *Writer) structure(line []byte) {
	st := &w.st
	ks := keyStart(line)
	if ks >= len(line) {
		return
	}
	switch line[ks] {
	case '-':
		if bytes.Equal(line[ks:trimRight(line, len(line))], []byte("---")) {
			st.kind = 0
			st.objIndent = -1
			st.data = dataNone
		}
		return
	case 'a', '"':
		if hasFoldPrefix(line, ks, "apiversion:") || hasFoldPrefix(line, ks, `"apiversion"`) {
			st.kind = 0
			st.objIndent = ks
		}
	}
	// Only the object's own kind counts, not an ownerReference's.
	objKey := ks == st.objIndent || st.objIndent < 0 && ks == 0
	if objKey && (hasFoldPrefix(line, ks, "kind:") || hasFoldPrefix(line, ks, `"kind"`)) {
		i := bytes.IndexByte(line[ks:], ':')
		v := bytes.Trim(line[ks+i+1:trimRight(line, len(line))], " \t\"',")
		if string(v) == "Secret" {
			st.kind = 1
		} else {
			st.kind = 2
		}
		return
	}
	e := trimRight(line, len(line))
	if e == 0 {
		return
	}
	switch line[e-1] {
	case ':':
		key := line[ks:e]
		if string(key) == "data:" || string(key) == "stringData:" {
			st.data = dataYAML
			st.dataString = key[0] == 's'
			st.dataIndent = ks
			st.childIndent = -1
		}
	case '{':
		rest := line[ks:e]
		for _, k := range []string{`"data"`, `"stringData"`} {
			if bytes.HasPrefix(rest, []byte(k)) {
				after := bytes.TrimLeft(rest[len(k):], " \t")
				if len(after) > 0 && after[0] == ':' && len(bytes.TrimSpace(after[1:])) == 1 {
					st.data = dataJSON
					st.dataString = k[1] == 's'
				}
			}
		}
	}
}

// dataLine redacts the value of one entry of a Secret's data map. Secret
// data is always base64; when the document's kind is not known yet
// (kubectl prints "data" before "kind"), any base64-shaped value is taken
// for secret data, so a ConfigMap printed that way may lose values that
// happen to look like base64.
func (w *Writer) dataLine(line []byte) {
	st := &w.st
	p := &w.p
	if blank(line) {
		return
	}
	ind := indentOf(line)
	if st.data == dataJSON {
		if line[ind] == '}' {
			st.data = dataNone
			return
		}
		ke := p.jsonString(ind)
		if ke < 0 {
			return
		}
		i := skipSpace(line, ke)
		if i >= len(line) || line[i] != ':' {
			return
		}
		vs := skipSpace(line, i+1)
		if vs < len(line) && line[vs] == '"' {
			if ve := p.jsonString(vs); ve > 0 {
				w.secretData(vs+1, ve-1, contDQuote)
			}
		}
		return
	}
	if line[ind] == '#' {
		return
	}
	if ind <= st.dataIndent {
		st.data = dataNone
		return
	}
	if st.childIndent < 0 {
		st.childIndent = ind
	}
	if ind != st.childIndent {
		// A continuation line of a multi-line value.
		w.secretData(ind, trimRight(line, len(line)), contEOL)
		return
	}
	// key: value, with the key maybe quoted.
	i := ind
	if line[i] == '"' || line[i] == '\'' {
		q := bytes.IndexByte(line[i+1:], line[i])
		if q < 0 {
			return
		}
		i += q + 2
	}
	c := bytes.Index(line[i:], []byte(": "))
	if c < 0 {
		return // "key:" opening a nested map: not Secret data
	}
	vs := skipSpace(line, i+c+2)
	if vs >= len(line) {
		return
	}
	switch line[vs] {
	case '|', '>':
		if st.dataString || st.kind == 1 {
			st.scalarIndent = ind
			st.scalarRule = ruleSecretData
			st.scalarMarked = false
		}
		return
	case '"', '\'':
		q := line[vs]
		ve := bytes.IndexByte(line[vs+1:], q)
		open := contDQuote
		if q == '\'' {
			open = contSQuote
		}
		if ve < 0 {
			w.secretData(vs+1, len(line), open)
			return
		}
		w.secretData(vs+1, vs+1+ve, open)
		return
	}
	ve := trimRight(line, len(line))
	if h := bytes.Index(line[vs:ve], []byte(" #")); h >= 0 {
		ve = trimRight(line, vs+h)
	}
	w.secretData(vs, ve, contEOL)
}

// secretData redacts a Secret data value per the rule in dataLine.
func (w *Writer) secretData(vs, ve int, open contKind) {
	p := &w.p
	v := p.line[vs:ve]
	if len(v) == 0 || bytes.Contains(v, []byte(Marker)) {
		return
	}
	if w.st.dataString || w.st.kind == 1 || (w.st.kind == 0 && base64Shaped(v)) {
		p.add(vs, ve, ruleSecretData, prioData, open, Marker)
	}
}
