package journalfile

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/ulikunitz/xz"
)

// builder writes small journal files the way journald lays them out
// (header, data objects, entry objects, one entry array), for tests: no
// journal file of a real machine is kept in the repository.
type builder struct {
	compact, keyed bool
	fileID         [16]byte
	buf            []byte
	entries        []uint64
	nEntries       uint64 // header count; defaults to len(entries)
	state          uint8
	extraFlags     uint32
	data           map[string]uint64
}

const testHeaderSize = 272

func newBuilder(compact, keyed bool) *builder {
	b := &builder{compact: compact, keyed: keyed, buf: make([]byte, testHeaderSize), data: map[string]uint64{}}
	copy(b.fileID[:], "nodesnap-test-id")
	return b
}

func (b *builder) header() Header {
	h := Header{FileID: b.fileID}
	if b.keyed {
		h.Incompatible |= IncompatibleKeyedHash
	}
	if b.compact {
		h.Incompatible |= IncompatibleCompact
	}
	return h
}

// object appends an object of type typ with body after its 16-byte
// header, 8-aligned, and returns its offset.
func (b *builder) object(typ, flags uint8, body []byte) uint64 {
	for len(b.buf)%8 != 0 {
		b.buf = append(b.buf, 0)
	}
	off := uint64(len(b.buf))
	var h [16]byte
	h[0], h[1] = typ, flags
	binary.LittleEndian.PutUint64(h[8:], uint64(16+len(body)))
	b.buf = append(b.buf, h[:]...)
	b.buf = append(b.buf, body...)
	return off
}

// compression codes for dataCompressed.
const (
	compNone = 0
	compXZ   = ObjectCompressedXZ
	compLZ4  = ObjectCompressedLZ4
	compZSTD = ObjectCompressedZSTD
)

func compress(t testing.TB, how uint8, p []byte) []byte {
	t.Helper()
	switch how {
	case compLZ4:
		out := make([]byte, 8+lz4.CompressBlockBound(len(p)))
		binary.LittleEndian.PutUint64(out, uint64(len(p)))
		n, err := lz4.CompressBlock(p, out[8:], nil)
		if err != nil || n == 0 {
			t.Fatalf("lz4: %v (%d)", err, n)
		}
		return out[:8+n]
	case compZSTD:
		enc, err := zstd.NewWriter(nil)
		if err != nil {
			t.Fatal(err)
		}
		return enc.EncodeAll(p, nil)
	case compXZ:
		var w bytes.Buffer
		x, err := xz.NewWriter(&w)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = x.Write(p)
		if err := x.Close(); err != nil {
			t.Fatal(err)
		}
		return w.Bytes()
	}
	return p
}

// dataObject appends (or reuses) the data object of a payload.
func (b *builder) dataObject(t testing.TB, payload string, how uint8) uint64 {
	key := string(rune('0'+how)) + payload
	if off, ok := b.data[key]; ok {
		return off
	}
	h := b.header()
	body := make([]byte, 48)
	binary.LittleEndian.PutUint64(body, h.Hash([]byte(payload)))
	binary.LittleEndian.PutUint64(body[40:], 1) // n_entries
	if b.compact {
		body = append(body, make([]byte, 8)...)
	}
	body = append(body, compress(t, how, []byte(payload))...)
	off := b.object(ObjectData, how, body)
	b.data[key] = off
	return off
}

// entry appends an entry with the given fields (payloads), the last of
// which may be compressed with how.
func (b *builder) entry(t testing.TB, realtime uint64, how uint8, fields ...string) uint64 {
	h := b.header()
	var items []byte
	for i, f := range fields {
		c := uint8(compNone)
		if i == len(fields)-1 {
			c = how
		}
		off := b.dataObject(t, f, c)
		if b.compact {
			items = binary.LittleEndian.AppendUint32(items, uint32(off))
		} else {
			items = binary.LittleEndian.AppendUint64(items, off)
			items = binary.LittleEndian.AppendUint64(items, h.Hash([]byte(f)))
		}
	}
	body := make([]byte, 48)
	binary.LittleEndian.PutUint64(body, uint64(len(b.entries)+1)) // seqnum
	binary.LittleEndian.PutUint64(body[8:], realtime)
	binary.LittleEndian.PutUint64(body[16:], realtime/2) // monotonic
	copy(body[24:40], "boot-id-for-test")
	off := b.object(ObjectEntry, 0, append(body, items...))
	b.entries = append(b.entries, off)
	return off
}

// bytes finishes the file: the entry arrays (split in two, as journald
// chains them) and the header.
func (b *builder) bytes() []byte {
	is := 8
	if b.compact {
		is = 4
	}
	var first uint64
	half := (len(b.entries) + 1) / 2
	parts := [][]uint64{b.entries[:half], b.entries[half:]}
	var prevNextField int = -1
	for k, part := range parts {
		if len(part) == 0 && k > 0 {
			break
		}
		body := make([]byte, 8)
		for _, e := range part {
			if is == 4 {
				body = binary.LittleEndian.AppendUint32(body, uint32(e))
			} else {
				body = binary.LittleEndian.AppendUint64(body, e)
			}
		}
		if k == len(parts)-1 {
			// Room for one more in the last array, as journald leaves.
			body = append(body, make([]byte, is)...)
		}
		off := b.object(ObjectEntryArray, 0, body)
		if k == 0 {
			first = off
		} else {
			binary.LittleEndian.PutUint64(b.buf[prevNextField:], off)
		}
		prevNextField = int(off) + 16
	}
	for len(b.buf)%8 != 0 {
		b.buf = append(b.buf, 0)
	}
	h := b.buf[:testHeaderSize]
	copy(h, Signature)
	binary.LittleEndian.PutUint32(h[12:], b.header().Incompatible|b.extraFlags)
	h[16] = b.state
	copy(h[24:40], b.fileID[:])
	binary.LittleEndian.PutUint64(h[88:], testHeaderSize)
	binary.LittleEndian.PutUint64(h[96:], uint64(len(b.buf)-testHeaderSize))
	n := b.nEntries
	if n == 0 {
		n = uint64(len(b.entries))
	}
	binary.LittleEndian.PutUint64(h[152:], n)
	binary.LittleEndian.PutUint64(h[176:], first)
	return append([]byte(nil), b.buf...)
}

// sampleFile is a small journal: a kubelet line, a kernel line, a
// multi-line message, a compressed one, and an entry without MESSAGE.
func sampleFile(t testing.TB, compact, keyed bool, how uint8) []byte {
	b := newBuilder(compact, keyed)
	base := uint64(1763715600_000000) // 2025-11-21T09:00:00Z
	b.entry(t, base+1, compNone, "_HOSTNAME=node-7", "SYSLOG_IDENTIFIER=kubelet", "_PID=2211", "_SYSTEMD_UNIT=kubelet.service", "MESSAGE=I1121 sync loop ok")
	b.entry(t, base+2, compNone, "_HOSTNAME=node-7", "SYSLOG_IDENTIFIER=kernel", "_TRANSPORT=kernel", "MESSAGE=INFO: task umount:31337 blocked for more than 120 seconds.")
	b.entry(t, base+3, compNone, "_HOSTNAME=node-7", "_COMM=containerd", "SYSLOG_PID=99", "_SYSTEMD_UNIT=containerd.service", "MESSAGE=first\nsecond\n\tthird\n")
	b.entry(t, base+4, how, "_HOSTNAME=node-7", "SYSLOG_IDENTIFIER=kubelet", "_PID=2211", "_SYSTEMD_UNIT=kubelet.service", "MESSAGE="+bigMessage)
	b.entry(t, base+5, compNone, "_HOSTNAME=node-7", "_SYSTEMD_UNIT=kubelet.service", "CODE_FILE=no-message.c")
	return b.bytes()
}

var bigMessage = "rbd output: " + string(bytes.Repeat([]byte("[114 98 100 58 32] "), 100))
