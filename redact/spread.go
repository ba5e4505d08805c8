package redact

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"hash/maphash"
	"io"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
)

// One answer per value, bundle-wide. A value one rule masked in one file
// (a k3s token in its config) may sit elsewhere with nothing around it
// that says "secret" (the bare token file, a daemon's log line). Each
// Writer of a run records the values it masked, as keyed hashes only
// (SpreadKey): never the value, not even to the supervisor. Before the
// archive is written, a last pass over the staged files (Spread.MaskFile)
// finds every other occurrence of those values, and of their base64 and
// URL-encoded forms, by a rolling hash of their first SpreadMin bytes
// checked against the keyed hash of the whole candidate, and masks it.

// SpreadRule is the name the manifest counts the last pass's masks under.
const SpreadRule = "masked-elsewhere"

// SpreadMin is the shortest value the last pass looks for: shorter ones
// are noise (a "true", a port) that would mask unrelated text.
const SpreadMin = 8

// SpreadMax is the longest: longer ones (a PEM body) are masked as blocks
// by their own rules.
const SpreadMax = 4096

// maxSpreadValues bounds what one Redactor records (each value is up to
// three hashes: itself, its unpadded base64, URL-encoded); the values seen
// and not recorded (not spreadable) are remembered up to four times as
// many.
const maxSpreadValues = 1 << 16

// SpreadKey is a run's key for the hashes of masked values: made by the
// supervisor, given to every collector child and to the worker that runs
// the last pass. Without it a hash cannot be tested against a guess.
type SpreadKey struct {
	Salt []byte `json:"salt"`
	Base uint64 `json:"base"` // the rolling hash's multiplier (odd)
}

// NewSpreadKey makes a random key for one run.
func NewSpreadKey() (SpreadKey, error) {
	k := SpreadKey{Salt: make([]byte, 32)}
	if _, err := rand.Read(k.Salt); err != nil {
		return k, fmt.Errorf("making the key of the bundle-wide masking pass: %w", err)
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return k, fmt.Errorf("making the key of the bundle-wide masking pass: %w", err)
	}
	k.Base = binary.LittleEndian.Uint64(b[:]) | 1
	return k, nil
}

// Valid reports whether the key was made (a zero key records nothing).
func (k SpreadKey) Valid() bool { return len(k.Salt) >= 16 && k.Base&1 == 1 }

// ValueHash is one masked value as the run knows it: its length, the
// rolling hash of its first SpreadMin bytes (to find where it may start),
// the same hash of all of it (a cheap test of a candidate: many values
// share a start, as JWTs do) and a keyed cryptographic hash of all of it
// (to confirm). The rolling hashes keep 32 of their 64 bits: a polynomial
// hash with a known multiplier is no one-way function, and 8 bytes
// behind 32 bits have billions of other preimages.
type ValueHash struct {
	Len    int    `json:"n"`
	Anchor uint32 `json:"a"`
	Full   uint32 `json:"f"`
	Sum    string `json:"h"`
}

// top keeps the best-mixed half of a rolling hash (its high bits depend
// on every byte; its low bits on few).
func top(h uint64) uint32 { return uint32(h >> 32) }

func (k SpreadKey) sum(v []byte) string { return k.summer().sum(v) }

// summer keeps one keyed hash to reuse (not safe for concurrent use).
type summer struct {
	mac hash.Hash
	out []byte
}

func (k SpreadKey) summer() *summer { return &summer{mac: hmac.New(sha256.New, k.Salt)} }

func (s *summer) sum(v []byte) string {
	s.mac.Reset()
	s.mac.Write(v)
	s.out = s.mac.Sum(s.out[:0])
	return hex.EncodeToString(s.out[:16])
}

func (k SpreadKey) roll(v []byte) uint64 {
	var h uint64
	for _, c := range v {
		h = h*k.Base + uint64(c)
	}
	return h
}

func (k SpreadKey) hash(v []byte, s *summer) ValueHash {
	return ValueHash{Len: len(v), Anchor: top(k.roll(v[:SpreadMin])), Full: top(k.roll(v)), Sum: s.sum(v)}
}

// spreadable reports whether a masked value is worth looking for
// elsewhere: long enough, one token, and not something that is also
// ordinary text (a path, a number, a word, a placeholder).
func spreadable(v []byte) bool {
	if len(v) < SpreadMin || len(v) > SpreadMax || v[0] == '/' || bytes.Contains(v, []byte("REDACTED")) {
		return false
	}
	var seen [4]uint64 // a bit per byte value: 32 bytes to clear, not 256
	distinct, digits, upper, other := 0, 0, 0, 0
	for _, c := range v {
		if c <= ' ' || c == 0x7f {
			return false
		}
		if bit := uint64(1) << (c & 63); seen[c>>6]&bit == 0 {
			seen[c>>6] |= bit
			distinct++
		}
		switch {
		case c >= '0' && c <= '9':
			digits++
		case c >= 'A' && c <= 'Z':
			upper++
		case c >= 'a' && c <= 'z', c == '-', c == '.':
		default:
			other++
		}
	}
	if distinct < 4 || digits == len(v) {
		return false // "********", a timestamp, a port list
	}
	// Lower-case words and names (kube-system, csi.ceph.com) are names;
	// but a long run of letters with no separator in it
	// ("abcdefghijabcdefghijabcd" as a .pgpass password) is not a word
	// a node's text uses for anything else.
	if digits+upper+other == 0 && (len(v) < 20 || bytes.ContainsAny(v, "-.")) {
		return false
	}
	return !hasToken(v)
}

// spreadRecorder collects the hashes a Redactor's Writers produce.
type spreadRecorder struct {
	key  SpreadKey
	mac  *summer // under mu
	seed maphash.Seed
	mu   sync.Mutex
	// done: maphash of each value seen → whether it was recorded (false:
	// not spreadable), so a value masked again costs one map lookup.
	done     map[uint64]bool
	recorded int // values recorded, at most maxSpreadValues
	// chunks hold every hash recorded (distinct values; see Masked), n of
	// them: appending never copies the hashes already recorded, as
	// growing one slice did (a fifth of recording a new value).
	chunks [][]ValueHash
	n      int
	taken  int    // the first taken hashes were returned by TakeMasked
	enc    []byte // scratch for a value's encoded forms (under mu)
}

// Chunks of hashes start small (a collector masks a handful of values)
// and grow to spreadChunkMax.
const spreadChunkMin, spreadChunkMax = 64, 4096

// RecordMasked makes every Writer of r record the values it masks, as
// hashes under key (see Masked). It must be called before r is used.
func (r *Redactor) RecordMasked(key SpreadKey) {
	if !key.Valid() {
		return
	}
	r.spread = &spreadRecorder{key: key, mac: key.summer(), seed: maphash.MakeSeed(), done: make(map[uint64]bool, 1024)}
}

// Masked returns the hashes of the values r's Writers masked so far (each
// value with its base64 and URL-encoded forms), or nil when RecordMasked
// was not called.
func (r *Redactor) Masked() []ValueHash {
	s := r.spread
	if s == nil {
		return nil
	}
	s.mu.Lock()
	out := s.since(0)
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Sum < out[j].Sum })
	// Two values' forms may coincide (one value the base64 of another).
	return slices.CompactFunc(out, func(a, b ValueHash) bool { return a == b })
}

func (s *spreadRecorder) add(v []byte) {
	v = bytes.Trim(v, "\"'`,;")
	if len(v) < SpreadMin || len(v) > SpreadMax {
		return
	}
	id := maphash.Bytes(s.seed, v)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, seen := s.done[id]; seen || len(s.done) >= 4*maxSpreadValues {
		return
	}
	ok := spreadable(v)
	if ok && s.recorded >= maxSpreadValues {
		return
	}
	s.done[id] = ok
	if !ok {
		return
	}
	s.recorded++
	s.put(s.key.hash(v, s.mac))
	s.enc = appendEncodedForms(s.enc[:0], v, func(f []byte) {
		if len(f) >= SpreadMin && len(f) <= SpreadMax {
			s.put(s.key.hash(f, s.mac))
		}
	})
}

// put records h. Distinct values have distinct hashes (done keeps each
// value once), so no set is kept of them: Masked drops what coincides.
func (s *spreadRecorder) put(h ValueHash) {
	if k := len(s.chunks); k == 0 || len(s.chunks[k-1]) == cap(s.chunks[k-1]) {
		size := spreadChunkMin
		if k > 0 {
			size = min(2*cap(s.chunks[k-1]), spreadChunkMax)
		}
		s.chunks = append(s.chunks, make([]ValueHash, 0, size))
	}
	last := &s.chunks[len(s.chunks)-1]
	*last = append(*last, h)
	s.n++
}

// since returns a copy of the hashes recorded from the from-th on.
func (s *spreadRecorder) since(from int) []ValueHash {
	out := make([]ValueHash, 0, s.n-from)
	at := 0
	for _, c := range s.chunks {
		if at+len(c) > from {
			out = append(out, c[max(0, from-at):]...)
		}
		at += len(c)
	}
	return out
}

// TakeMasked returns the hashes recorded since the last call (see
// Masked): a collector child sends them as each file is closed, so a
// child killed on its deadline has already told what it masked.
func (r *Redactor) TakeMasked() []ValueHash {
	s := r.spread
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.taken == s.n {
		return nil
	}
	out := s.since(s.taken)
	s.taken = s.n
	return out
}

// appendEncodedForms calls each with each of the other spellings of v a
// bundle may hold: base64 and URL-encoded. The base64 is looked for
// without its padding: the padded form starts with it, so a copy of
// either is found, its '=' left after the marker. The forms are written
// into buf (returned, for reuse): no allocation for a value that needs
// no URL-encoding.
func appendEncodedForms(buf, v []byte, each func([]byte)) []byte {
	buf = base64.RawStdEncoding.AppendEncode(buf[:0], v)
	each(buf)
	for _, c := range v {
		if !urlUnreserved(c) {
			buf = append(buf[:0], url.QueryEscape(string(v))...)
			each(buf)
			break
		}
	}
	return buf
}

// urlUnreserved: what url.QueryEscape leaves as it is.
func urlUnreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~'
}

// RecordEnv records, for the last pass, the values r's rules would mask in
// an environment ("NAME=value" each, as an env file holds them) that is
// not itself written: a CSI container's environment read from its OCI
// config, the pods' env the kubelet collector drops whole. A secret
// variable's value printed bare in a log is then masked there too. Nothing
// is recorded unless RecordMasked was called.
func (r *Redactor) RecordEnv(env []string) {
	if r.spread == nil || len(env) == 0 {
		return
	}
	w := r.NewWriter(io.Discard)
	for _, kv := range env {
		if !strings.Contains(kv, "=") {
			continue
		}
		line := strings.Map(func(c rune) rune {
			if c == '\n' || c == '\r' {
				return ' '
			}
			return c
		}, kv)
		_, _ = io.WriteString(w, line+"\n")
	}
	_ = w.Close()
}
