package redact

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"regexp"
)

// Options are the run-time settings of a Redactor. They are plain data so
// the supervisor can hand them to its child processes as JSON; they hold the
// run's obfuscation key, so they must never be written into a bundle.
type Options struct {
	// Obfuscate lists what to replace with consistent tokens: "ip",
	// "hostname", "mac", "user".
	Obfuscate []string `json:"obfuscate,omitempty"`
	// Key is the per-run secret tokens are derived from: a token is the
	// category and the first 48 bits of HMAC-SHA256(Key, value), so every
	// process given the same Key produces the same token for the same value
	// without any coordination, and nobody without the Key can test a guess
	// against a token. At least 16 bytes; see NewKey.
	Key []byte `json:"key,omitempty"`
	// Hostnames to obfuscate: the node's hostname and FQDN. A few generic
	// words (localhost, master, ...) are never treated as hostnames, since
	// replacing them would corrupt what diagnosis reads (mountinfo's
	// "master:12").
	Hostnames []string `json:"hostnames,omitempty"`
	// Users are user names to obfuscate wherever they appear as a word.
	// User names in URLs (user@host) and home directories are found
	// without being listed.
	Users []string `json:"users,omitempty"`
	// Own are nodesnap's own credentials for this run (its --upload URL's
	// query and user info, the values of its secret flags): they are
	// redacted wherever they appear, as "nodesnap-own-secret", whatever
	// surrounds them (its own command line in the process list, an error
	// quoting the URL). Values shorter than 6 bytes are ignored.
	Own []string `json:"own,omitempty"`
}

// NewKey returns a fresh random obfuscation key for one run.
func NewKey() ([]byte, error) {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		return nil, fmt.Errorf("making the obfuscation key: %w", err)
	}
	return k, nil
}

// Obfuscation categories.
const (
	catIP = iota
	catHost
	catMAC
	catUser
	numCats
)

var (
	catNames  = [numCats]string{"ip", "hostname", "mac", "user"}
	catPrefix = [numCats]string{"ip", "host", "mac", "user"}
)

// notHostnames are words never obfuscated as hostnames: they mean something
// else in the text diagnosis reads.
var notHostnames = []string{
	"localhost", "localhost.localdomain", "master", "shared", "slave",
	"private", "unbindable", "kubernetes", "default", "node", "worker",
}

type obfCat struct {
	on      bool
	counter string // the name its replacements are counted under
}

type obfuscator struct {
	key       []byte
	cats      [numCats]obfCat
	hostRes   []*regexp.Regexp
	hostAlway []int32 // hostname patterns with no literal to prefilter on
}

// token derives the token for a normalised value.
func (o *obfuscator) token(cat int, norm string) string {
	m := hmac.New(sha256.New, o.key)
	m.Write([]byte(catNames[cat]))
	m.Write([]byte{0})
	m.Write([]byte(norm))
	sum := m.Sum(nil)
	return catPrefix[cat] + "-" + hex.EncodeToString(sum[:6])
}

// isToken reports whether v is a token this package makes, so that
// re-redacting an obfuscated bundle leaves the tokens alone.
func isToken(v []byte) bool {
	d := bytes.IndexByte(v, '-')
	if d < 0 || len(v)-d-1 != 12 {
		return false
	}
	known := false
	for _, p := range catPrefix {
		if string(v[:d]) == p {
			known = true
		}
	}
	if !known {
		return false
	}
	for _, b := range v[d+1:] {
		if !('0' <= b && b <= '9' || 'a' <= b && b <= 'f') {
			return false
		}
	}
	return true
}

// hasToken reports whether b contains a token as a word of its own.
func hasToken(b []byte) bool {
	for i := 0; i < len(b); {
		d := bytes.IndexByte(b[i:], '-')
		if d < 0 {
			return false
		}
		d += i
		i = d + 1
		s := d
		for s > 0 && 'a' <= b[s-1] && b[s-1] <= 'z' {
			s--
		}
		e := d + 1
		for e < len(b) && e-d <= 13 && ('0' <= b[e] && b[e] <= '9' || 'a' <= b[e] && b[e] <= 'f') {
			e++
		}
		if e-d == 13 && (e == len(b) || !isAlnum(b[e])) && isToken(b[s:e]) {
			return true
		}
	}
	return false
}

type tokenEntry struct{ token, orig string }

// tokenFor returns the token for a normalised value, from the Writer's cache
// when it has been seen before.
func (w *Writer) tokenFor(cat int, norm []byte) tokenEntry {
	m := w.tokens[cat]
	if t, ok := m[string(norm)]; ok {
		return t
	}
	if m == nil {
		m = map[string]tokenEntry{}
		w.tokens[cat] = m
	}
	orig := string(norm)
	t := tokenEntry{token: w.r.obf.token(cat, orig), orig: orig}
	m[orig] = t
	return t
}

// obfAccepted records an obfuscation that was applied.
func (w *Writer) obfAccepted(e *edit) {
	w.obfN[e.cat]++
	if w.maps == nil {
		w.maps = map[string]string{}
	}
	if _, ok := w.maps[e.repl]; !ok {
		w.maps[e.repl] = e.orig
		w.r.addMapping(e.repl, e.orig)
	}
}

// obf proposes replacing line[s:e] with the token of norm.
func (p *pass) obf(s, e int, cat int, norm []byte) {
	if e <= s || isToken(p.line[s:e]) {
		return
	}
	t := p.w.tokenFor(cat, norm)
	p.cands = append(p.cands, edit{
		s: s, e: e, rule: -1, prio: prioObf, obf: true, cat: int8(cat),
		repl: t.token, orig: t.orig,
	})
}

func (p *pass) obfOn(cat int) bool {
	o := p.w.r.obf
	return o != nil && o.cats[cat].on
}

// obfUser proposes obfuscating a user name found by a rule (a URL's user).
func (p *pass) obfUser(s, e int) {
	if p.obfOn(catUser) && e > s && !bytes.Contains(p.line[s:e], []byte(Marker)) {
		p.obf(s, e, catUser, p.line[s:e])
	}
}

// lowerInto folds b into buf, or returns nil if it does not fit.
func lowerInto(b []byte, buf []byte) []byte {
	if len(b) > len(buf) {
		return nil
	}
	for i, c := range b {
		buf[i] = fold(c)
	}
	return buf[:len(b)]
}

// obfKeyword handles a matcher keyword of the obfuscation categories.
func (p *pass) obfKeyword(k *keyword, s, e int) {
	line := p.line
	switch k.kind {
	case kwHost:
		if s > 0 && isAlnum(line[s-1]) || e < len(line) && isAlnum(line[e]) {
			return
		}
		var buf [256]byte
		if n := lowerInto(line[s:e], buf[:]); n != nil {
			p.obf(s, e, catHost, n)
		}
	case kwUser:
		if s > 0 && (isAlnum(line[s-1]) || line[s-1] == '_' || line[s-1] == '-') ||
			e < len(line) && (isAlnum(line[e]) || line[e] == '_' || line[e] == '-') {
			return
		}
		p.obf(s, e, catUser, line[s:e])
	case kwHome:
		n := e
		for n < len(line) && (isKeyByte(line[n])) {
			n++
		}
		if n > e {
			p.obf(e, n, catUser, line[e:n])
		}
	case kwHostRegex:
		p.runHostRegex(k.arg)
	}
}

// runHostRegex obfuscates what a configured hostname pattern matches.
func (p *pass) runHostRegex(i int32) {
	// Host patterns share the ran list with regex rules, offset past them.
	id := len(p.w.r.regexes) + int(i)
	for _, r := range p.ran {
		if r == id {
			return
		}
	}
	p.ran = append(p.ran, id)
	line := p.line
	var buf [256]byte
	for _, m := range p.w.r.obf.hostRes[i].FindAllIndex(line, -1) {
		s, e := m[0], m[1]
		if e <= s || s > 0 && isAlnum(line[s-1]) || e < len(line) && isAlnum(line[e]) {
			continue
		}
		if n := lowerInto(line[s:e], buf[:]); n != nil {
			p.obf(s, e, catHost, n)
		}
	}
}

// obfScan looks for the categories found by shape: IP addresses and MACs,
// and runs hostname patterns that have no literal to wait for.
func (p *pass) obfScan() {
	o := p.w.r.obf
	if o.cats[catIP].on {
		p.scanIPv6()
		p.scanIPv4()
	}
	if o.cats[catMAC].on {
		p.scanMAC()
	}
	if o.cats[catHost].on {
		for _, i := range o.hostAlway {
			p.runHostRegex(i)
		}
	}
}

// scanIPv4 finds dotted quads. To stay off version numbers and device
// numbers it wants exactly four parts of 0-255 without leading zeros, not
// preceded by a letter (v1.28.3.4, go1.21.0.1), by digits/dots (longer
// dotted numbers such as OIDs) or by the word "version", and not followed
// by more of the same.
// Addresses that identify nothing are left: 0.0.0.0/8, loopback, link-local
// (169.254.169.254 is every cloud's metadata server), multicast, broadcast.
func (p *pass) scanIPv4() {
	line := p.line
	for i := 0; i < len(line); {
		d := bytes.IndexByte(line[i:], '.')
		if d < 0 {
			return
		}
		dot := i + d
		i = dot + 1
		s := dot
		for s > 0 && dot-s < 4 && isDigit(line[s-1]) {
			s--
		}
		if s == dot || dot-s > 3 || s > 0 && (isAlnum(line[s-1]) || line[s-1] == '.' || line[s-1] == '_') {
			continue
		}
		e, a, b, ok := dotted4(line, s)
		if !ok {
			continue
		}
		if e < len(line) && (isAlnum(line[e]) || line[e] == '_' || line[e] == '.' && e+1 < len(line) && isDigit(line[e+1])) {
			i = e
			continue
		}
		i = e
		if a == 0 || a == 127 || a >= 224 || a == 169 && b == 254 || versionBefore(line, s) {
			continue
		}
		p.obf(s, e, catIP, line[s:e])
	}
}

// versionBefore reports whether the word "version" shortly precedes s
// ("version 1.28.3.4", "gitVersion":"1.2.3.4"): four-part versions look
// exactly like addresses otherwise.
func versionBefore(line []byte, s int) bool {
	lo := max(0, s-24)
	var buf [24]byte
	return bytes.Contains(lowerInto(line[lo:s], buf[:]), []byte("version"))
}

// dotted4 parses a.b.c.d at line[s:], returning its end and first two
// octets.
func dotted4(line []byte, s int) (end, a, b int, ok bool) {
	i := s
	for part := 0; part < 4; part++ {
		if part > 0 {
			if i >= len(line) || line[i] != '.' {
				return 0, 0, 0, false
			}
			i++
		}
		st := i
		v := 0
		for i < len(line) && i-st < 4 && isDigit(line[i]) {
			v = v*10 + int(line[i]-'0')
			i++
		}
		n := i - st
		if n == 0 || n > 3 || v > 255 || n > 1 && line[st] == '0' {
			return 0, 0, 0, false
		}
		switch part {
		case 0:
			a = v
		case 1:
			b = v
		}
	}
	return i, a, b, true
}

// scanIPv6 finds IPv6 addresses: runs of hex digits, colons and dots that
// contain "::" or seven colons and parse as an address. Times (12:00:00),
// MACs (five colons) and device numbers (253:0) never qualify.
func (p *pass) scanIPv6() {
	line := p.line
	for i := 0; i < len(line); {
		d := bytes.IndexByte(line[i:], ':')
		if d < 0 {
			return
		}
		c := i + d
		s := c
		for s > 0 && (isHex(line[s-1]) || line[s-1] == ':' || line[s-1] == '.') {
			s--
		}
		e := c
		for e < len(line) && (isHex(line[e]) || line[e] == ':' || line[e] == '.') {
			e++
		}
		i = e
		for e > s && line[e-1] == '.' {
			e--
		}
		if e-s > 1 && line[e-1] == ':' && line[e-2] != ':' {
			e-- // "fe80::1:" ending a phrase
		}
		if s > 0 && (isAlnum(line[s-1]) || line[s-1] == '_') || e < len(line) && (isAlnum(line[e]) || line[e] == '_') {
			continue
		}
		run := line[s:e]
		colons := bytes.Count(run, []byte(":"))
		if colons < 2 || colons < 7 && !bytes.Contains(run, []byte("::")) {
			continue
		}
		addr, err := netip.ParseAddr(string(run))
		if err != nil || !addr.Is6() || addr.IsLoopback() || addr.IsUnspecified() || addr.IsMulticast() {
			continue
		}
		p.obf(s, e, catIP, []byte(addr.String()))
	}
}

// scanMAC finds colon-separated MAC addresses (aa:bb:cc:dd:ee:ff).
func (p *pass) scanMAC() {
	line := p.line
	for i := 0; i < len(line); {
		d := bytes.IndexByte(line[i:], ':')
		if d < 0 {
			return
		}
		c := i + d
		i = c + 1
		s := c - 2
		if s < 0 || s+17 > len(line) || !isHex(line[s]) || !isHex(line[s+1]) ||
			s > 0 && (isAlnum(line[s-1]) || line[s-1] == ':') {
			continue
		}
		ok := true
		for g := 1; g < 6 && ok; g++ {
			k := s + 3*g
			ok = line[k-1] == ':' && isHex(line[k]) && isHex(line[k+1])
		}
		e := s + 17
		if !ok || e < len(line) && (isAlnum(line[e]) || line[e] == ':') {
			continue
		}
		i = e
		var buf [17]byte
		n := lowerInto(line[s:e], buf[:])
		if string(n) == "00:00:00:00:00:00" || string(n) == "ff:ff:ff:ff:ff:ff" {
			continue
		}
		p.obf(s, e, catMAC, n)
	}
}
