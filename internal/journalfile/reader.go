package journalfile

import (
	"errors"
	"fmt"
	"strings"
)

// Match is a journalctl match expression: groups separated by "+" are
// alternatives; within a group, terms of the same field are alternatives
// and terms of different fields must all hold, as journalctl reads
// "_SYSTEMD_UNIT=a.service + _PID=1 UNIT=a.service".
type Match struct {
	terms  []string
	groups [][][]int // group → field → term indexes
	// except are groups an entry must not satisfy (Except).
	except [][][]int
}

// Except returns m less the entries x matches: m's entries that x does
// not select. The journal collector reads with it what claims to be a
// unit's (its SYSLOG_IDENTIFIER) but is not proven to be (its
// _SYSTEMD_UNIT, _UID, as journald recorded them).
func (m Match) Except(x Match) Match {
	out := Match{terms: append(append([]string(nil), m.terms...), x.terms...), groups: m.groups, except: m.except}
	off := len(m.terms)
	for _, g := range x.groups {
		ng := make([][]int, len(g))
		for i, field := range g {
			for _, t := range field {
				ng[i] = append(ng[i], t+off)
			}
		}
		out.except = append(out.except, ng)
	}
	return out
}

// ParseMatch reads journalctl's match arguments. No terms matches every
// entry.
func ParseMatch(args []string) (Match, error) {
	var m Match
	var group [][]int
	fields := map[string]int{}
	flush := func() error {
		if len(group) == 0 {
			return errors.New(`a "+" with no match on one side`)
		}
		m.groups = append(m.groups, group)
		group, fields = nil, map[string]int{}
		return nil
	}
	for _, a := range args {
		if a == "+" {
			if err := flush(); err != nil {
				return Match{}, err
			}
			continue
		}
		field, _, ok := strings.Cut(a, "=")
		if !ok || field == "" {
			return Match{}, fmt.Errorf("match %q is not FIELD=VALUE", a)
		}
		m.terms = append(m.terms, a)
		i, ok := fields[field]
		if !ok {
			i = len(group)
			fields[field] = i
			group = append(group, nil)
		}
		group[i] = append(group[i], len(m.terms)-1)
	}
	if len(m.terms) > 0 {
		if err := flush(); err != nil {
			return Match{}, err
		}
	}
	return m, nil
}

// eval tells whether the terms found in an entry satisfy the expression.
func (m *Match) eval(found []bool) bool {
	if len(m.except) > 0 && evalGroups(m.except, found) {
		return false
	}
	return len(m.groups) == 0 || evalGroups(m.groups, found)
}

// evalGroups tells whether found satisfies one of groups.
func evalGroups(groups [][][]int, found []bool) bool {
	for _, g := range groups {
		all := true
		for _, field := range g {
			any := false
			for _, t := range field {
				any = any || found[t]
			}
			if !any {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

// Cursor is where reading of one file stands: the file (by id, so that a
// file rotated under the same name is noticed) and the index of the next
// entry to read, newest first; -1 when the file is done.
type Cursor struct {
	FileID [16]byte
	Next   int
}

// Iter reads the entries of one file that match, newest first, from
// Cursor.Next down to the first entry older than Since.
type Iter struct {
	f      *File
	m      *Match
	since  uint64
	next   int
	byHash map[uint64][]int
	found  []bool
	items  []Item
	valid  bool // an entry read whole: damage from here on is damage
	done   bool
	// Err says why the file was left before its oldest entry in range
	// (damage); Skipped counts tail entries left out as half written.
	Err     error
	Skipped int

	peeked bool
	peekAt int
	cur    Entry
}

// NewIter starts reading f newest first at entry next (-1 for the newest
// the file lists; a cursor's Next to resume).
func NewIter(f *File, m *Match, since uint64, next int) *Iter {
	// Resuming inside the file (next given), the entries ahead were read
	// whole before: damage from there on is damage, not a tail being
	// written.
	resume := next >= 0 && next < f.Len()
	if !resume {
		next = f.Len() - 1
	}
	it := &Iter{f: f, m: m, since: since, next: next, valid: resume, byHash: map[uint64][]int{}, found: make([]bool, len(m.terms))}
	for i, t := range m.terms {
		h := f.Header.Hash([]byte(t))
		it.byHash[h] = append(it.byHash[h], i)
	}
	return it
}

// Cursor is where a later NewIter resumes: at the entry Peek returned,
// if it was not consumed.
func (it *Iter) Cursor() Cursor {
	c := Cursor{FileID: it.f.Header.FileID, Next: it.next}
	if it.peeked {
		c.Next = it.peekAt
	}
	if it.done && !it.peeked {
		c.Next = -1
	}
	return c
}

// Peek returns the next (older) matching entry without consuming it, or
// false when the file has no more in range.
func (it *Iter) Peek() (*Entry, bool) {
	if it.peeked {
		return &it.cur, true
	}
	for !it.done {
		if it.next < 0 {
			it.done = true
			break
		}
		i := it.next
		it.next--
		e, err := it.entry(i)
		if err != nil {
			if !it.valid {
				// The newest slots of a file journald is writing may
				// hold entries not yet whole.
				it.Skipped++
				continue
			}
			it.Err, it.done = err, true
			break
		}
		it.valid = true
		if e.Realtime < it.since {
			it.done = true
			break
		}
		ok, err := it.matches(&e)
		if err != nil {
			it.Err, it.done = err, true
			break
		}
		if ok {
			it.cur, it.peeked, it.peekAt = e, true, i
			return &it.cur, true
		}
	}
	return nil, false
}

// SeqnumID is the file's sequence number id: entries of two files with
// the same id and sequence number are the same entry.
func (it *Iter) SeqnumID() [16]byte { return it.f.Header.SeqnumID }

// Next consumes the entry Peek returned.
func (it *Iter) Next() { it.peeked = false }

func (it *Iter) entry(i int) (Entry, error) {
	off, err := it.f.EntryOffset(i)
	if err != nil {
		return Entry{}, err
	}
	if off == 0 {
		return Entry{}, corruptf("entry slot %d is empty", i)
	}
	// The items live in the iterator's buffer: an iterator holds one
	// entry at a time (the one peeked), so it is reused entry after entry.
	e, err := it.f.Entry(off, it.items)
	it.items = e.Items[:0]
	return e, err
}

func (it *Iter) matches(e *Entry) (bool, error) {
	if len(it.m.terms) == 0 {
		return true, nil
	}
	clear(it.found)
	compact := it.f.Header.Compact()
	for _, item := range e.Items {
		h := item.Hash
		if compact {
			var err error
			if h, err = it.f.DataHash(item.Offset); err != nil {
				return false, err
			}
		}
		ts, ok := it.byHash[h]
		if !ok {
			continue
		}
		p, err := it.f.Data(item.Offset)
		if err != nil {
			return false, err
		}
		for _, t := range ts {
			if string(p) == it.m.terms[t] {
				it.found[t] = true
			}
		}
	}
	return it.m.eval(it.found), nil
}

// Short holds the fields journalctl's short output formats print.
type Short struct {
	// A nil field is absent; an empty one is present and empty. They
	// point into arena, reused from entry to entry.
	Message, Hostname, Identifier, Comm, PID, SyslogPID, SourceRealtime []byte
	arena                                                               []byte
}

var shortFields = []struct {
	prefix string
	get    func(*Short) *[]byte
}{
	{"MESSAGE=", func(s *Short) *[]byte { return &s.Message }},
	{"_HOSTNAME=", func(s *Short) *[]byte { return &s.Hostname }},
	{"SYSLOG_IDENTIFIER=", func(s *Short) *[]byte { return &s.Identifier }},
	{"_COMM=", func(s *Short) *[]byte { return &s.Comm }},
	{"_PID=", func(s *Short) *[]byte { return &s.PID }},
	{"SYSLOG_PID=", func(s *Short) *[]byte { return &s.SyslogPID }},
	{"_SOURCE_REALTIME_TIMESTAMP=", func(s *Short) *[]byte { return &s.SourceRealtime }},
}

// Short reads the fields of e that the short formats print. A field whose
// data object cannot be read is left out, as journalctl does. The fields
// stay valid until the next call with the same s.
func (it *Iter) Short(e *Entry, s *Short) {
	arena := s.arena[:0]
	if arena == nil {
		// Non-nil, so that an empty field is told from an absent one.
		arena = make([]byte, 0, 512)
	}
	var span [7][2]int
	var seen [7]bool
	for _, item := range e.Items {
		p, err := it.f.Data(item.Offset)
		if err != nil {
			continue
		}
		for k, sf := range shortFields {
			if !seen[k] && len(p) >= len(sf.prefix) && string(p[:len(sf.prefix)]) == sf.prefix {
				seen[k] = true
				span[k] = [2]int{len(arena), len(arena) + len(p) - len(sf.prefix)}
				arena = append(arena, p[len(sf.prefix):]...)
				break
			}
		}
	}
	*s = Short{arena: arena}
	for k, sf := range shortFields {
		if seen[k] {
			*sf.get(s) = arena[span[k][0]:span[k][1]:span[k][1]]
		}
	}
}

// Newest returns the index of the iterator whose next entry is the newest
// (latest realtime, then highest sequence number), or -1 when every
// iterator is done. Yielding that entry, calling its Next and asking
// again merges several files newest first.
func Newest(its []*Iter) int {
	best := -1
	var be *Entry
	for i, it := range its {
		e, ok := it.Peek()
		if !ok {
			continue
		}
		if best < 0 || e.Realtime > be.Realtime || e.Realtime == be.Realtime && e.Seqnum > be.Seqnum {
			best, be = i, e
		}
	}
	return best
}
