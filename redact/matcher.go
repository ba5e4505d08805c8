package redact

// matcher finds every occurrence of a set of keywords in one pass over a
// line, with ASCII letters folded to lower case (an Aho-Corasick automaton
// compiled to a DFA). Almost every line a collector writes contains none of
// the words that introduce a secret, so one table-driven pass that proves it
// is what keeps the redactor fast; the rules only look at the places the
// matcher points to.
type matcher struct {
	// class maps a byte to its column in next; bytes that occur in no
	// keyword share column 0, which keeps the table small enough for L1.
	class  [256]uint8
	nclass uint32
	// next[state+class] is the next state, already multiplied by nclass so
	// the scan loop needs no multiply; hitFlag marks states that end a
	// keyword.
	next []uint32
	// next16 is next in half the memory, used when every entry fits in
	// 16 bits (the built-in rule set does): the rows of the states plain
	// text keeps visiting then stay in L1. Its states are numbered so that
	// those ending a keyword come last: an entry at or above hitMin16 is a
	// hit, with no flag bit to spare.
	next16   []uint16
	hitMin16 uint32
	hits16   [][]int32
	// recip16 is 2^32/nclass rounded up: a state's row (s/nclass, where s
	// is below 2^16) is (s*recip16)>>32, a multiply instead of a divide
	// per keyword hit.
	recip16 uint64
	// hits[state/nclass] lists the keywords (indexes into the words the
	// matcher was built from) that end in that state.
	hits [][]int32
}

const hitFlag = 1 << 31

// event is one keyword occurrence: the keyword's index and the offset just
// past its last byte.
type event struct {
	kw  int32
	end int
}

func fold(b byte) byte {
	if 'A' <= b && b <= 'Z' {
		return b + 'a' - 'A'
	}
	return b
}

// newMatcher builds the automaton. Empty words are ignored.
func newMatcher(words [][]byte) *matcher {
	m := &matcher{}
	// Columns: one per distinct folded byte used by a keyword.
	var col [256]uint8
	n := uint8(0)
	for _, w := range words {
		for _, b := range w {
			f := fold(b)
			if col[f] == 0 {
				n++
				col[f] = n
			}
		}
	}
	for b := 0; b < 256; b++ {
		m.class[b] = col[fold(byte(b))]
	}
	m.nclass = uint32(n) + 1

	// Trie over columns.
	type node struct {
		child map[uint8]int32
		fail  int32
		out   []int32
	}
	nodes := []node{{child: map[uint8]int32{}}}
	for i, w := range words {
		if len(w) == 0 {
			continue
		}
		s := int32(0)
		for _, b := range w {
			c := m.class[b]
			nx, ok := nodes[s].child[c]
			if !ok {
				nx = int32(len(nodes))
				nodes = append(nodes, node{child: map[uint8]int32{}})
				nodes[s].child[c] = nx
			}
			s = nx
		}
		nodes[s].out = append(nodes[s].out, int32(i))
	}

	// Breadth-first: failure links, inherited outputs and the full
	// transition table (missing edges follow the failure link).
	nc := m.nclass
	m.next = make([]uint32, uint32(len(nodes))*nc)
	m.hits = make([][]int32, len(nodes))
	queue := []int32{0}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		if s != 0 {
			f := nodes[s].fail
			nodes[s].out = append(nodes[s].out, nodes[f].out...)
		}
		m.hits[s] = nodes[s].out
		for c := uint32(0); c < nc; c++ {
			var t int32
			if nx, ok := nodes[s].child[uint8(c)]; ok {
				t = nx
				if s != 0 {
					nodes[nx].fail = int32(m.next[uint32(nodes[s].fail)*nc+c] &^ hitFlag / nc)
				}
				queue = append(queue, nx)
			} else if s != 0 {
				t = int32(m.next[uint32(nodes[s].fail)*nc+c] &^ hitFlag / nc)
			}
			m.next[uint32(s)*nc+c] = uint32(t) * nc
		}
	}
	// Mark states with outputs. Done after the table is complete because
	// a state's outputs are only final once its failure chain is.
	for i := range m.next {
		if len(m.hits[m.next[i]/nc]) > 0 {
			m.next[i] |= hitFlag
		}
	}
	if len(m.next) <= 1<<16 {
		m.build16(len(nodes))
	}
	return m
}

// build16 fills next16 from next, renumbering the states so that those
// with hits come last.
func (m *matcher) build16(states int) {
	nc := m.nclass
	perm := make([]uint32, states)
	n := uint32(0)
	for pass := 0; pass < 2; pass++ {
		for s := 0; s < states; s++ {
			if (len(m.hits[s]) > 0) == (pass == 1) {
				perm[s] = n
				n++
			}
		}
		if pass == 0 {
			m.hitMin16 = n * nc
		}
	}
	m.recip16 = (1<<32 + uint64(nc) - 1) / uint64(nc)
	m.next16 = make([]uint16, len(m.next))
	m.hits16 = make([][]int32, states)
	for s := 0; s < states; s++ {
		ns := perm[s]
		m.hits16[ns] = m.hits[s]
		for c := uint32(0); c < nc; c++ {
			t := (m.next[uint32(s)*nc+c] &^ hitFlag) / nc
			m.next16[ns*nc+c] = uint16(perm[t] * nc)
		}
	}
}

// scan appends every keyword occurrence in line to ev.
func (m *matcher) scan(line []byte, ev []event) []event {
	if m.next16 != nil {
		return m.scan16(line, ev)
	}
	next, class := m.next, &m.class
	s := uint32(0)
	for i, b := range line {
		s = next[s+uint32(class[b])]
		if s&hitFlag != 0 {
			s &^= hitFlag
			for _, k := range m.hits[s/m.nclass] {
				ev = append(ev, event{kw: k, end: i + 1})
			}
		}
	}
	return ev
}

// scan16 is scan over next16.
func (m *matcher) scan16(line []byte, ev []event) []event {
	next, class, hitMin := m.next16, &m.class, m.hitMin16
	s := uint32(0)
	for i, b := range line {
		s = uint32(next[s+uint32(class[b])])
		if s >= hitMin {
			for _, k := range m.hits16[(uint64(s)*m.recip16)>>32] {
				ev = append(ev, event{kw: k, end: i + 1})
			}
		}
	}
	return ev
}
