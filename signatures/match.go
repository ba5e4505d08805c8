package signatures

import (
	"bytes"
	"regexp"
	"strings"
	"sync"
)

// compiled is a class ready for matching lines: its words split into
// alternatives once.
type compiled struct {
	c      *Class
	words  [][][]byte
	needs  [][][]byte
	unless [][]byte
}

var (
	compiledClasses []compiled
	byID            = map[string]*Class{}
	grams           *gramIndex
	// firstAlt[i] is the index of class i's first alternative among the
	// prefilter's alternatives.
	firstAlt []int
)

// prepare builds the matching index on first use, not in init: every
// process of the binary would pay for it, and only readers of logs match.
var prepare = sync.OnceFunc(func() {
	for i := range Classes {
		c := &Classes[i]
		if byID[c.ID] != nil {
			panic("signatures: class " + c.ID + " listed twice")
		}
		byID[c.ID] = c
		cc := compiled{c: c, words: split(c.Words), needs: split(c.Needs)}
		for _, u := range c.Unless {
			cc.unless = append(cc.unless, []byte(u))
		}
		compiledClasses = append(compiledClasses, cc)
	}
	grams = buildGrams(compiledClasses)
	n := 0
	for _, cc := range compiledClasses {
		firstAlt = append(firstAlt, n)
		n += len(cc.words[0])
	}
})

func split(ws []string) [][][]byte {
	var out [][][]byte
	for _, w := range ws {
		var alts [][]byte
		for _, a := range strings.Split(w, "|") {
			alts = append(alts, []byte(a))
		}
		out = append(out, alts)
	}
	return out
}

// ByID returns a class by its ID, or nil.
func ByID(id string) *Class {
	prepare()
	return byID[id]
}

// lower is ASCII lower case.
func lower(b byte) byte {
	if 'A' <= b && b <= 'Z' {
		return b + 'a' - 'A'
	}
	return b
}

// contains reports whether s holds w, its first byte exactly and the rest
// in any ASCII case.
func contains(s, w []byte) bool {
	if len(w) == 0 {
		return true
	}
	first := w[0]
	for i := 0; i+len(w) <= len(s); {
		j := bytes.IndexByte(s[i:len(s)-len(w)+1], first)
		if j < 0 {
			return false
		}
		i += j
		k := 1
		for k < len(w) && lower(s[i+k]) == lower(w[k]) {
			k++
		}
		if k == len(w) {
			return true
		}
		i++
	}
	return false
}

func anyOf(s []byte, alts [][]byte) bool {
	for _, a := range alts {
		if contains(s, a) {
			return true
		}
	}
	return false
}

// words reports whether s holds every word (one alternative of each) and
// none of unless.
func (cc *compiled) matches(s []byte, withNeeds bool) bool {
	return cc.matchesFrom(s, 0, withNeeds)
}

// matchesFrom is matches from the word at index from on.
func (cc *compiled) matchesFrom(s []byte, from int, withNeeds bool) bool {
	for _, alts := range cc.words[from:] {
		if !anyOf(s, alts) {
			return false
		}
	}
	if withNeeds {
		for _, alts := range cc.needs {
			if !anyOf(s, alts) {
				return false
			}
		}
	}
	for _, u := range cc.unless {
		if bytes.Contains(s, u) {
			return false
		}
	}
	return true
}

// Classify returns the ID of the class a format string belongs to, or ""
// when none takes it. A class with Needs is a variant of a later base
// class and takes no format by itself.
func Classify(format string) string {
	prepare()
	b := []byte(format)
	for i := range compiledClasses {
		cc := &compiledClasses[i]
		if len(cc.c.Needs) > 0 || cc.c.Independent || cc.c.KeyRe == nil && len(cc.c.Sources) == 1 && (cc.c.Sources[0] == "kernel" || cc.c.Sources[0] == "errno") {
			continue
		}
		if cc.matches(b, false) {
			return cc.c.ID
		}
	}
	return ""
}

// MatchIDs appends to dst the classes a line matches, without extracting
// keys: every class it matches, but a Fallback class only when no other
// did (then the first Fallback that matches).
func MatchIDs(dst []*Class, line []byte) []*Class {
	prepare()
	var buf [4]uint64
	var cbuf [2]uint64
	set, classes := bitSet(buf[:len(grams.always)]), bitSet(cbuf[:len(grams.alwaysClasses)])
	if len(grams.always) > len(buf) || len(grams.alwaysClasses) > len(cbuf) {
		set, classes = newBitSet(len(grams.refs)), newBitSet(len(compiledClasses))
	}
	if !grams.candidates(line, set, classes) {
		return dst
	}
	n := len(dst)
	specific := false
	var fallback *Class
	for i := range compiledClasses {
		if !classes.has(i) {
			continue
		}
		cc := &compiledClasses[i]
		if cc.c.Fallback && (specific || fallback != nil) {
			continue
		}
		// The first word: only the alternatives the prefilter saw.
		hit := false
		for k := range cc.words[0] {
			if set.has(firstAlt[i]+k) && contains(line, cc.words[0][k]) {
				hit = true
				break
			}
		}
		if !hit || !cc.matchesFrom(line, 1, true) {
			continue
		}
		switch {
		case cc.c.Fallback:
			fallback = cc.c
		case cc.c.Independent:
			dst = append(dst, cc.c)
		default:
			specific = true
			dst = append(dst, cc.c)
		}
	}
	if !specific && fallback != nil {
		dst = append(dst, nil)
		copy(dst[n+1:], dst[n:])
		dst[n] = fallback
	}
	return dst
}

// MatchLine returns the classes one log line matches, each with its key
// and the objects the line names. The line is one line of any log format
// (klog or glog text, structured `"msg" key="value"`, JSON, a journal or
// syslog line) without its newline.
func MatchLine(line []byte) []Match {
	cs := MatchIDs(nil, line)
	if len(cs) == 0 {
		return nil
	}
	obj := Extract(line)
	out := make([]Match, 0, len(cs))
	for _, c := range cs {
		out = append(out, Match{ID: c.ID, Key: c.KeyOf(line, obj), Objects: obj})
	}
	return out
}

// KeyOf is the key of a line of the class: its KeyRe's first group, else
// the object of its Key kind.
func (c *Class) KeyOf(line []byte, obj Objects) string {
	if c.KeyRe != nil {
		if m := c.KeyRe.FindSubmatch(line); m != nil {
			for _, g := range m[1:] {
				if len(g) > 0 {
					return string(g)
				}
			}
		}
	}
	switch c.Key {
	case KeyPod:
		if obj.PodUID != "" {
			return obj.PodUID
		}
		return obj.Pod
	case KeyVolume:
		return obj.Volume
	case KeyDevice:
		if obj.Device != "" {
			return obj.Device
		}
		return obj.Volume
	case KeyPath:
		return obj.Path
	case KeyServer:
		return obj.Server
	case KeyTask:
		return obj.Task
	}
	return ""
}

const uidRe = `[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`

// The extraction expressions compile on first use: every process of the
// binary (each collector and isolation worker) runs this package's init,
// and few of them read a log line.
var (
	// `Pod "name_ns(uid)"` (format.Pod of kubelets before 1.21), in any
	// quoting.
	rePodFormat = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`([a-z0-9][-a-z0-9.]*)_([a-z0-9][-a-z0-9]*)\((` + uidRe + `)\)`)
	})
	// podUID="uid", "podUID":"uid", (UID: "uid"), pod "uid", podUID=uid.
	rePodUID = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?i)(?:pod_?uid|\(UID:|pod|orphaned pod|podName:)[\s"\\:=]*(` + uidRe + `)`)
	})
	// /var/lib/kubelet/pods/<uid>/ in a path.
	rePodDir = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`/pods/(` + uidRe + `)`) })
	// pod="ns/name", "pod":"ns/name", pod=ns/name.
	rePodName = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`\bpod` + `\\*"?\s*[=:]\s*` + q + `?([a-z0-9][-a-z0-9]*/[a-z0-9][-a-z0-9.]*)`)
	})
	// JSON logging of klog.KObj: "pod":{"name":"web-0","namespace":"default"}.
	rePodJSON = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`"pod":\{"name":"([^"]+)","namespace":"([^"]+)"\}`) })
	// The volume: UniqueName first, then volumeName=, volume "x", the CSI
	// volume ID in its many spellings.
	reUniqueName = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?i)UniqueName:\s*` + q + `([^"\\]+)|volumeName:([^\s"\\]+)`)
	})
	reVolume = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?i)(?:volume_?name|volume_?id|volumeHandle|VolumeId|Req-ID|Volume ID|spec\.Name)` + `\\*"?\s*[=:]?\s*` + q + `?([^\s"\\,}\]]+)` +
			`|(?:volume|for volume|Volume)\s+` + q + `([^"\\]+)` +
			// unquoted, a name with a digit or a dash: "volume pvc-5d1e ...",
			// "for volume: 268e7aa8-..." (vsphere-csi's wording)
			`|\b[Vv]olume:?\s+([A-Za-z0-9_.^/-]*[0-9-][A-Za-z0-9_.^/-]*)`)
	})
	reDevice = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(/dev/(?:rbd|nbd|sd|xvd|vd|nvme|dm-|mapper/|loop|longhorn/)[^\s"\\:,;)\]}]*)`)
	})
	// A path starts where a path can: not inside another path's
	// component (the "/data/..." of "/var/data/..."), under one of the
	// roots node storage lives in, /var/<any> included (microk8s's
	// /var/snap/microk8s/common/var/lib/kubelet, a kubelet root moved to
	// /var/data/kubelet).
	rePath = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?:^|[^A-Za-z0-9_.~-])(/(?:var/[A-Za-z0-9_.-]+|run|mnt|data|opt|home|srv)/[^\s"\\:,;)\]}]+)`)
	})
	reServer = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`nfs: server (\S+)|libceph: (mon\d+ \S+)|(?:server|Server)[=:\s]+` + q + `?([A-Za-z0-9][-A-Za-z0-9.:\[\]]+)`)
	})
	reTask = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`task (\S+?:\d+) blocked`) })
)

// Extract reads every object a line names. Only matched lines are read
// (regular expressions; the matching itself is plain byte search).
func Extract(line []byte) Objects {
	var o Objects
	// Each expression below without a literal of its own to start from
	// runs only when the line holds what it cannot match without (a
	// byte search costs far less than the expression on a long line;
	// every log record that reports an operation is read here).
	if m := matchIf(parenUID(line), rePodFormat(), line); m != nil {
		o.Pod, o.PodUID = string(m[2])+"/"+string(m[1]), string(m[3])
	}
	if o.PodUID == "" {
		if m := podUIDSubmatch(line); m != nil {
			o.PodUID = string(m[1])
		} else if m := rePodDir().FindSubmatch(line); m != nil {
			o.PodUID = string(m[1])
		}
	}
	if o.Pod == "" {
		if m := rePodJSON().FindSubmatch(line); m != nil {
			o.Pod = string(m[2]) + "/" + string(m[1])
		} else if m := podNameSubmatch(line); m != nil {
			o.Pod = string(m[1])
		}
	}
	if m := matchIf(hasNameColon(line), reUniqueName(), line); m != nil {
		o.Volume = first(m)
	} else if m := volumeSubmatch(line); m != nil {
		o.Volume = first(m)
	}
	if m := reDevice().FindSubmatch(line); m != nil {
		o.Device = string(m[1])
	}
	if m := pathSubmatch(line); m != nil {
		o.Path = strings.TrimRight(string(m[1]), ".")
	}
	if m := matchIf(bytes.Contains(line, []byte("erver")) || bytes.Contains(line, []byte("libceph: ")), reServer(), line); m != nil {
		o.Server = first(m)
	}
	if m := matchIf(bytes.Contains(line, []byte(" blocked")), reTask(), line); m != nil {
		o.Task = string(m[1])
	}
	if o.Volume == "" && o.Path != "" {
		// A block volume's publish path, a PV's staging path:
		// .../volumeDevices/publish/<pv>, .../csi/pv/<pv>/globalmount.
		for _, marker := range []string{"/volumeDevices/publish/", "/volumeDevices/staging/", "/csi/pv/"} {
			if i := strings.Index(o.Path, marker); i >= 0 {
				o.Volume, _, _ = strings.Cut(o.Path[i+len(marker):], "/")
			}
		}
	}
	if o.Volume == "" && o.Path != "" {
		// A pod volume's directory names it:
		// .../pods/<uid>/volumes/<plugin>/<name>[/mount].
		if i := strings.Index(o.Path, "/volumes/"); i >= 0 {
			rest := strings.Split(o.Path[i+len("/volumes/"):], "/")
			if len(rest) >= 2 && rest[1] != "" {
				o.Volume = rest[1]
			}
		}
	}
	return o
}

// matchIf runs re on line when may says the line can match it.
func matchIf(may bool, re *regexp.Regexp, line []byte) [][]byte {
	if !may {
		return nil
	}
	return re.FindSubmatch(line)
}

// podUIDSubmatch is rePodUID's first match, read UID by UID in the
// window where a match with that UID can be: from its word (a few bytes
// before it, past the separators) to its end. Every match holds a UID
// right after its word and separators, and no match's word can start
// inside an earlier UID (the words hold letters no UID has), so the
// first UID with a match in its window holds the leftmost match, which
// its window holds whole; the expression has no assertion that looks
// outside the match.
func podUIDSubmatch(line []byte) [][]byte {
	for from := 0; ; {
		u := firstUID(line[from:])
		if u < 0 {
			return nil
		}
		u += from
		lo := u
		for lo > 0 && strings.IndexByte("\t\n\f\r \"\\:=", line[lo-1]) >= 0 {
			lo--
		}
		// Every word ends in "d" ("pod", "uid", "(UID" before its ':')
		// or "e" ("podName" before its ':'), in any case, right before
		// the separators.
		// The longest word, "orphaned pod", is 12 bytes.
		if lo > 0 && (lower(line[lo-1]) == 'd' || lower(line[lo-1]) == 'e') {
			if m := rePodUID().FindSubmatch(line[max(lo-12, 0) : u+36]); m != nil {
				return m
			}
		}
		from = u + 1
	}
}

// firstUID is where the first UID of a line starts (-1: none).
func firstUID(line []byte) int {
	for i := 8; i < len(line); {
		j := bytes.IndexByte(line[i:], '-')
		if j < 0 {
			return -1
		}
		i += j
		s := i - 8
		if s+36 <= len(line) && isHex(line[s:i]) && isHex(line[i+1:i+5]) && line[i+5] == '-' && isHex(line[i+6:i+10]) &&
			line[i+10] == '-' && isHex(line[i+11:i+15]) && line[i+15] == '-' && isHex(line[i+16:i+28]) {
			return s
		}
		i++
	}
	return -1
}

// volumeSubmatch is reVolume's first match, read from the byte before
// where its first match can start. Every match starts at one of its
// words (case folded as (?i) folds: none of these letters has a fold
// outside ASCII but the 's' of "spec.Name", which may be the two-byte
// 'ſ'): at "volume", four bytes before it ("for volume"), at "req-id",
// or up to two bytes before "pec.name". So no match starts before the
// least of those; the byte before it is kept for the \b of the
// unquoted form, and no match can start at that byte itself (it is
// before every word), so the expression finds the same submatches.
//
// Where a line says "volume" long before its match (a kubelet's
// "MountVolume.SetUp succeeded for volume", "unmounted volumes=[...]"),
// scanning on from there costs the expression at every byte: the places
// a match can start (volumeStarts) are tried one by one instead, each with
// the expression anchored there (volumeAt), the first that matches being
// where the leftmost match starts. A line with more such places than
// maxVolumeStarts is read from the first, as before.
func volumeSubmatch(line []byte) [][]byte {
	var buf [maxVolumeStarts]int
	if starts, ok := volumeStarts(line, buf[:0]); ok {
		for _, c := range starts {
			if m := volumeAt(line, c); m != nil {
				return m
			}
		}
		return nil
	}
	from := len(line)
	if i := indexFold(line, "volume"); i >= 0 {
		from = i - 4
	}
	if i := indexFold(line, "req-id"); i >= 0 && i < from {
		from = i
	}
	if i := indexFold(line, "pec.name"); i >= 0 && i-2 < from {
		from = i - 2
	}
	if from == len(line) {
		return nil
	}
	return reVolume().FindSubmatch(line[max(from-1, 0):])
}

// indexFold is where w (lower case ASCII) first is in s in any ASCII
// case (-1: nowhere).
func indexFold(s []byte, w string) int {
	for i := 0; i+len(w) <= len(s); i++ {
		j := bytes.IndexAny(s[i:len(s)-len(w)+1], w[:1]+strings.ToUpper(w[:1]))
		if j < 0 {
			return -1
		}
		i += j
		k := 1
		for k < len(w) && lower(s[i+k]) == w[k] {
			k++
		}
		if k == len(w) {
			return i
		}
	}
	return -1
}

// pathRoots are the roots rePath's path starts under, with the '/'
// each is followed by: every match's path starts with '/' and one.
var pathRoots = []string{"var/", "run/", "mnt/", "data/", "opt/", "home/", "srv/"}

// pathSubmatch is rePath's first match, read from the byte before the
// line's first '/' followed by one of pathRoots. Every match's path
// starts at such a '/' and the match at most one byte before it, so no
// match starts earlier; the expression run from there finds the same
// submatches (its ^ at the new start cannot begin a path: the byte
// after it is the '/', not a root's letter).
func pathSubmatch(line []byte) [][]byte {
	for i := 0; ; i++ {
		j := bytes.IndexByte(line[i:], '/')
		if j < 0 {
			return nil
		}
		i += j
		for _, r := range pathRoots {
			if bytes.HasPrefix(line[i+1:], []byte(r)) {
				return rePath().FindSubmatch(line[max(i-1, 0):])
			}
		}
	}
}

// podNameSubmatch is rePodName's first match, read from the byte before
// the line's first "pod" (its \b looks at that byte).
func podNameSubmatch(line []byte) [][]byte {
	for from := 0; ; {
		i := bytes.Index(line[from:], []byte("pod"))
		if i < 0 {
			return nil
		}
		i += from
		if podNameAt(line, i) {
			return rePodName().FindSubmatch(line[max(i-1, 0):])
		}
		from = i + 1
	}
}

// podNameAt tells whether rePodName's words can start at line[i:], a
// "pod": a word boundary before it, then what `\\*"?\s*[=:]` takes
// (backslashes, a quote or none, white space, '=' or ':'), read byte
// by byte (each part's bytes are none of the next part's, so there is
// one way to read it). A match starts only where this holds, so the
// first such "pod" is where the first match can start.
func podNameAt(line []byte, i int) bool {
	if i > 0 && isWordByte(line[i-1]) {
		return false
	}
	j := i + len("pod")
	for j < len(line) && line[j] == '\\' {
		j++
	}
	if j < len(line) && line[j] == '"' {
		j++
	}
	for j < len(line) && strings.IndexByte("\t\n\f\r ", line[j]) >= 0 {
		j++
	}
	return j < len(line) && (line[j] == '=' || line[j] == ':')
}

// isWordByte is \w's byte: an ASCII letter, digit or '_'.
func isWordByte(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_'
}

// parenUID tells a line with '(' before a UID's first eight hex digits
// and their dash: what rePodFormat cannot match without.
func parenUID(line []byte) bool {
	for i := 0; ; {
		j := bytes.IndexByte(line[i:], '(')
		if j < 0 {
			return false
		}
		i += j + 1
		if len(line)-i > 9 && line[i+8] == '-' && isHex(line[i:i+8]) {
			return true
		}
	}
}

func isHex(b []byte) bool {
	for _, c := range b {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') && (c < 'A' || c > 'F') {
			return false
		}
	}
	return true
}

// hasNameColon tells a line with "UniqueName:" or "volumeName:" in any
// case: what reUniqueName cannot match without.
func hasNameColon(line []byte) bool {
	for i := 0; ; {
		j := bytes.IndexByte(line[i:], ':')
		if j < 0 {
			return false
		}
		i += j + 1
		if i > 10 {
			w := line[i-11 : i-1]
			if bytes.EqualFold(w, []byte("uniquename")) || bytes.EqualFold(w, []byte("volumename")) {
				return true
			}
		}
	}
}

func first(m [][]byte) string {
	for _, g := range m[1:] {
		if len(g) > 0 {
			return string(g)
		}
	}
	return ""
}
