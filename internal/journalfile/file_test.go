package journalfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

// readText reads every entry of a file matching matches, newest first as
// the collector does, and returns the text oldest first.
func readText(data []byte, matches []string) (string, *Iter, error) {
	entries, it, err := readEntries(data, matches)
	var out strings.Builder
	for i := len(entries) - 1; i >= 0; i-- {
		out.WriteString(entries[i])
	}
	return out.String(), it, err
}

// readEntries is each entry's text, newest first.
func readEntries(data []byte, matches []string) ([]string, *Iter, error) {
	f, err := Open(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, nil, err
	}
	m, err := ParseMatch(matches)
	if err != nil {
		return nil, nil, err
	}
	it := NewIter(f, &m, 0, -1)
	var entries []string
	var s Short
	for {
		e, ok := it.Peek()
		if !ok {
			break
		}
		it.Short(e, &s)
		if b, ok := AppendShortISOPrecise(nil, e.Realtime, &s); ok {
			entries = append(entries, string(b))
		}
		it.Next()
	}
	return entries, it, nil
}

var kubeletMatch = []string{"_SYSTEMD_UNIT=kubelet.service", "+", "SYSLOG_IDENTIFIER=kubelet"}

func TestReadSample(t *testing.T) {
	wantKubelet := "2025-11-21T09:00:00.000001+0000 node-7 kubelet[2211]: I1121 sync loop ok\n" +
		"2025-11-21T09:00:00.000004+0000 node-7 kubelet[2211]: " + bigMessage + "\n"
	indent := strings.Repeat(" ", len("2025-11-21T09:00:00.000003+0000 node-7 containerd[99]: "))
	for _, layout := range []struct {
		name           string
		compact, keyed bool
	}{{"regular", false, false}, {"keyed", false, true}, {"compact", true, true}} {
		for _, comp := range []struct {
			name string
			how  uint8
		}{{"plain", compNone}, {"lz4", compLZ4}, {"zstd", compZSTD}, {"xz", compXZ}} {
			t.Run(layout.name+"/"+comp.name, func(t *testing.T) {
				data := sampleFile(t, layout.compact, layout.keyed, comp.how)
				for _, tc := range []struct {
					matches []string
					want    string
				}{
					{kubeletMatch, wantKubelet},
					{[]string{"_TRANSPORT=kernel"}, "2025-11-21T09:00:00.000002+0000 node-7 kernel: INFO: task umount:31337 blocked for more than 120 seconds.\n"},
					// _COMM when there is no SYSLOG_IDENTIFIER, SYSLOG_PID
					// when there is no _PID; continuation lines indented to
					// the message, the final newline ending the message.
					{[]string{"_SYSTEMD_UNIT=containerd.service"}, "2025-11-21T09:00:00.000003+0000 node-7 containerd[99]: first\n" + indent + "second\n" + indent + "\tthird\n"},
					// Two fields in one group must both hold.
					{[]string{"_SYSTEMD_UNIT=kubelet.service", "_TRANSPORT=kernel"}, ""},
					// Two values of one field: either.
					{[]string{"_TRANSPORT=kernel", "_TRANSPORT=stdout"}, "2025-11-21T09:00:00.000002+0000 node-7 kernel: INFO: task umount:31337 blocked for more than 120 seconds.\n"},
					{[]string{"SYSLOG_IDENTIFIER=nothing"}, ""},
				} {
					got, it, err := readText(data, tc.matches)
					if err != nil {
						t.Fatalf("%v: %v", tc.matches, err)
					}
					if got != tc.want {
						t.Errorf("%v:\ngot  %q\nwant %q", tc.matches, got, tc.want)
					}
					if it.Err != nil || it.Skipped != 0 {
						t.Errorf("%v: err %v, skipped %d", tc.matches, it.Err, it.Skipped)
					}
				}
			})
		}
	}
}

// A file journald is writing: the header counts entries whose objects are
// not whole yet, or whose array slot is still empty. The complete entries
// are read, the others skipped, and nothing is called damage.
func TestHalfWrittenTail(t *testing.T) {
	for _, compact := range []bool{false, true} {
		b := newBuilder(compact, true)
		base := uint64(1763715600_000000)
		b.entry(t, base+1, compNone, "SYSLOG_IDENTIFIER=kubelet", "MESSAGE=one")
		b.entry(t, base+2, compNone, "SYSLOG_IDENTIFIER=kubelet", "MESSAGE=two")
		last := b.entry(t, base+3, compNone, "SYSLOG_IDENTIFIER=kubelet", "MESSAGE=three")
		// An empty slot counted by the header.
		b.nEntries = 4
		data := b.bytes()
		// The last entry's fixed part not yet written.
		for i := last + 16; i < last+64; i++ {
			data[i] = 0
		}
		got, it, err := readText(data, []string{"SYSLOG_IDENTIFIER=kubelet"})
		if err != nil {
			t.Fatal(err)
		}
		if want := "2025-11-21T09:00:00.000001+0000 kubelet: one\n2025-11-21T09:00:00.000002+0000 kubelet: two\n"; got != want {
			t.Errorf("compact %v: got %q, want %q", compact, got, want)
		}
		if it.Err != nil || it.Skipped != 2 {
			t.Errorf("compact %v: err %v, skipped %d (want 2: the empty slot and the half-written entry)", compact, it.Err, it.Skipped)
		}
		// Resumed from a cursor at the broken entry, it is damage: the
		// entries ahead were read whole on an earlier pass.
		f, err := Open(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		m, _ := ParseMatch(nil)
		it = NewIter(f, &m, 0, 2)
		if e, ok := it.Peek(); ok || it.Err == nil || it.Skipped != 0 {
			t.Errorf("compact %v: resumed at a broken entry: %+v %v, err %v, skipped %d", compact, e, ok, it.Err, it.Skipped)
		}
		if c := it.Cursor(); c.Next != -1 {
			t.Errorf("compact %v: cursor after damage %+v, want done", compact, c)
		}
	}
}

// Damaged and hostile files: each is refused with ErrCorrupt (or a
// newer-systemd error), or read up to the damage, never past a bound.
func TestCorruptFiles(t *testing.T) {
	good := func() []byte { return sampleFile(t, false, false, compLZ4) }
	le := binary.LittleEndian
	// Offsets of interest in the sample, found by reading it.
	f, err := Open(bytes.NewReader(good()), int64(len(good())))
	if err != nil {
		t.Fatal(err)
	}
	entryOff := func(i int) uint64 {
		o, err := f.EntryOffset(i)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	firstItem := func(i int) uint64 { return entryOff(i) + entryFixedSize }
	for _, tc := range []struct {
		name    string
		mutate  func(b []byte) []byte
		openErr string // Open fails with this
		chain   bool   // the chain is reported short
		want    int    // kubelet entries still read
		iterErr bool   // reading stopped at damage
	}{
		{name: "empty", mutate: func(b []byte) []byte { return nil }, openErr: "too short"},
		{name: "signature", mutate: func(b []byte) []byte { b[0] = 'X'; return b }, openErr: "no journal signature"},
		{name: "newer systemd", mutate: func(b []byte) []byte { le.PutUint32(b[12:], 1<<7); return b }, openErr: "newer systemd"},
		{name: "header size", mutate: func(b []byte) []byte { le.PutUint64(b[88:], 12); return b }, openErr: "header size"},
		// The second array is cut: the first lists entries 0-2.
		{name: "truncated in the arrays", mutate: func(b []byte) []byte { return b[:len(b)-20] }, chain: true, want: 1},
		{name: "entry array loops", mutate: func(b []byte) []byte {
			first := le.Uint64(b[176:])
			le.PutUint64(b[first+16:], first) // next = itself
			le.PutUint64(b[152:], 1000)
			return b
		}, chain: true, want: 1},
		{name: "array points outside", mutate: func(b []byte) []byte {
			le.PutUint64(b[176:], uint64(len(b))+4096)
			return b
		}, chain: true},
		{name: "huge object size", mutate: func(b []byte) []byte {
			le.PutUint64(b[entryOff(0)+8:], 1<<62)
			return b
		}, want: 1, iterErr: true},
		// A field the match looks at (SYSLOG_IDENTIFIER, the second
		// item) cannot be read: reading stops there.
		{name: "matched item outside the file", mutate: func(b []byte) []byte {
			le.PutUint64(b[firstItem(3)+16:], uint64(len(b))*2)
			return b
		}, want: 0, iterErr: true},
		// A field only printed (_HOSTNAME) cannot be read: it is left
		// out of the line, as journalctl leaves out what it cannot show.
		{name: "printed item outside the file", mutate: func(b []byte) []byte {
			le.PutUint64(b[firstItem(3):], uint64(len(b))*2)
			return b
		}, want: 2},
		{name: "item not a data object", mutate: func(b []byte) []byte {
			// The item points at the entry itself; its hash is still
			// that of a kubelet term, so the payload is read.
			off := firstItem(3)
			for k := 0; k < 4; k++ {
				if binary.LittleEndian.Uint64(b[off+uint64(16*k)+8:]) != 0 {
					le.PutUint64(b[off+uint64(16*k):], entryOff(3))
				}
			}
			return b
		}, want: 0, iterErr: true},
		{name: "lz4 claims too much", mutate: func(b []byte) []byte {
			// The big message of entry 3 is its last item.
			o, _ := f.Entry(entryOff(3), nil)
			d := o.Items[len(o.Items)-1].Offset
			le.PutUint64(b[d+dataFixedSize:], MaxPayload+1)
			return b
		}, want: 2}, // the entry is read, its MESSAGE left out: printed without? see below
		{name: "misaligned entry", mutate: func(b []byte) []byte {
			first := le.Uint64(b[176:])
			le.PutUint64(b[first+24:], entryOff(0)+1)
			return b
		}, want: 1, iterErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := tc.mutate(good())
			f, err := Open(bytes.NewReader(data), int64(len(data)))
			if tc.openErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.openErr) {
					t.Fatalf("Open: %v, want an error with %q", err, tc.openErr)
				}
				if !strings.Contains(tc.openErr, "newer") && !errors.Is(err, ErrCorrupt) {
					t.Errorf("Open: %v does not wrap ErrCorrupt", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			if (f.ChainError != nil) != tc.chain {
				t.Errorf("chain error %v, want one: %v", f.ChainError, tc.chain)
			}
			got, it, err := readText(data, kubeletMatch)
			if err != nil {
				t.Fatal(err)
			}
			n := strings.Count(got, " kubelet[2211]: ")
			if tc.name == "lz4 claims too much" {
				// The entry whose MESSAGE cannot be read is not printed
				// (journalctl skips entries without MESSAGE).
				if n != 1 || strings.Contains(got, "rbd output") {
					t.Errorf("got %q", got)
				}
				return
			}
			if n != tc.want {
				t.Errorf("read %d kubelet entries, want %d: %q", n, tc.want, got)
			}
			if (it.Err != nil) != tc.iterErr {
				t.Errorf("iteration error %v, want one: %v", it.Err, tc.iterErr)
			}
			if it.Err != nil && !errors.Is(it.Err, ErrCorrupt) {
				t.Errorf("iteration error %v does not wrap ErrCorrupt", it.Err)
			}
		})
	}
}

func TestParseMatch(t *testing.T) {
	for _, bad := range [][]string{{"+"}, {"A=1", "+"}, {"+", "A=1"}, {"NOEQUALS"}, {"=v"}} {
		if _, err := ParseMatch(bad); err == nil {
			t.Errorf("ParseMatch(%q) accepted", bad)
		}
	}
	m, err := ParseMatch([]string{"A=1", "A=2", "B=3", "+", "C=4"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		found []bool // A=1 A=2 B=3 C=4
		want  bool
	}{
		{[]bool{true, false, true, false}, true},
		{[]bool{false, true, true, false}, true},
		{[]bool{true, true, false, false}, false},
		{[]bool{false, false, false, true}, true},
		{[]bool{false, false, true, false}, false},
	} {
		if got := m.eval(tc.found); got != tc.want {
			t.Errorf("eval(%v) = %v, want %v", tc.found, got, tc.want)
		}
	}
}

// Except leaves out what its match selects: the identifier claimed, less
// what a trusted field proves.
func TestMatchExcept(t *testing.T) {
	m, err := ParseMatch([]string{"SYSLOG_IDENTIFIER=kubelet"})
	if err != nil {
		t.Fatal(err)
	}
	x, err := ParseMatch([]string{"_SYSTEMD_UNIT=kubelet.service", "+", "SYSLOG_IDENTIFIER=kubelet", "_UID=0"})
	if err != nil {
		t.Fatal(err)
	}
	e := m.Except(x)
	for _, tc := range []struct {
		found []bool // SYSLOG_IDENTIFIER=kubelet, then x's: _SYSTEMD_UNIT=kubelet.service SYSLOG_IDENTIFIER=kubelet _UID=0
		want  bool
	}{
		{[]bool{true, false, true, false}, true},   // logger -t kubelet, uid 1000
		{[]bool{true, true, true, false}, false},   // the unit's own
		{[]bool{true, false, true, true}, false},   // root, identified
		{[]bool{false, false, false, true}, false}, // not the identifier
	} {
		if got := e.eval(tc.found); got != tc.want {
			t.Errorf("eval(%v) = %v, want %v", tc.found, got, tc.want)
		}
	}
	if len(e.terms) != 4 {
		t.Errorf("terms %q", e.terms)
	}
}

func TestXZDictionaryBound(t *testing.T) {
	p := compress(t, compXZ, []byte("MESSAGE=hello"))
	if d, ok := xzDictSize(p); !ok || d > maxXZDict {
		t.Fatalf("xzDictSize of a real stream: %d %v", d, ok)
	}
	if out, err := decompressXZ(p, 1<<20); err != nil || string(out) != "MESSAGE=hello" {
		t.Fatalf("decompressXZ: %q %v", out, err)
	}
	// The LZMA2 dictionary byte is the first filter property of the block
	// header; 40 asks for 4 GiB.
	q := append([]byte(nil), p...)
	hs := (int(q[12]) + 1) * 4
	i := bytes.Index(q[12:12+hs], []byte{0x21, 0x01})
	if i < 0 {
		t.Fatalf("no LZMA2 filter in %x", q[12:12+hs])
	}
	q[12+i+2] = 40
	if _, err := decompressXZ(q, 1<<20); err == nil || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a 4 GiB dictionary was not refused: %v", err)
	}
}
