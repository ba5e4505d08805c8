// Package journalfile reads systemd journal files without journalctl or
// libsystemd: the header, the entry array chain, entries and their data
// objects (compressed with XZ, LZ4 or ZSTD), in regular and compact
// layout, as described in https://systemd.io/JOURNAL_FILE_FORMAT/.
//
// Journal files on a node are untrusted input: they may be half written
// (journald is appending to the file being read), damaged, or crafted.
// Every offset and size is checked against the file's size and the
// package's limits before it is used; reading stops cleanly at the first
// object that does not hold together, and no input makes it panic. It
// does no I/O of its own: files come as an io.ReaderAt with their size, so
// the caller decides where (and under which deadline) the bytes are read.
package journalfile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
)

// Signature opens every journal file.
const Signature = "LPKSHHRH"

// Incompatible header flags: a reader that does not know one must not
// read the file.
const (
	IncompatibleCompressedXZ   = 1 << 0
	IncompatibleCompressedLZ4  = 1 << 1
	IncompatibleKeyedHash      = 1 << 2
	IncompatibleCompressedZSTD = 1 << 3
	IncompatibleCompact        = 1 << 4
	incompatibleKnown          = 1<<5 - 1
)

// File states in the header.
const (
	StateOffline  = 0
	StateOnline   = 1
	StateArchived = 2
)

// Object types.
const (
	ObjectUnused         = 0
	ObjectData           = 1
	ObjectField          = 2
	ObjectEntry          = 3
	ObjectDataHashTable  = 4
	ObjectFieldHashTable = 5
	ObjectEntryArray     = 6
	ObjectTag            = 7
)

// Object flags: how a DATA object's payload is compressed.
const (
	ObjectCompressedXZ   = 1 << 0
	ObjectCompressedLZ4  = 1 << 1
	ObjectCompressedZSTD = 1 << 2
)

// Limits. journald itself refuses entries larger than 768 MiB; a
// diagnostic reader has no use for objects anywhere near that, and memory
// must stay bounded whatever a file claims.
const (
	// MaxObjectSize bounds any object read (an entry's item list, an
	// entry array, a stored payload).
	MaxObjectSize = 16 << 20
	// MaxPayload bounds a decompressed payload.
	MaxPayload = 16 << 20
	// maxArrays bounds the length of the entry array chain.
	maxArrays = 1 << 20
)

const (
	objectHeaderSize = 16
	minHeaderSize    = 184 // through entry_array_offset
	entryFixedSize   = 64  // object header, seqnum, realtime, monotonic, boot_id, xor_hash
	dataFixedSize    = 64  // object header, hash, next_hash, next_field, entry, entry_array, n_entries
	compactDataExtra = 8   // tail_entry_array_offset, tail_entry_array_n_entries
	arrayFixedSize   = 24  // object header, next_entry_array_offset
)

// ErrCorrupt is wrapped by every error about the content of a file (as
// opposed to an error reading it).
var ErrCorrupt = errors.New("journal file is damaged or not a journal file")

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// Header is the part of a journal file's header this package uses.
type Header struct {
	Compatible   uint32
	Incompatible uint32
	State        uint8
	FileID       [16]byte
	MachineID    [16]byte
	TailBootID   [16]byte
	SeqnumID     [16]byte
	HeaderSize   uint64
	ArenaSize    uint64
	NObjects     uint64
	NEntries     uint64
	// EntryArrayOffset is the first array of the chain listing every
	// entry in the order written.
	EntryArrayOffset uint64
	HeadRealtime     uint64
	TailRealtime     uint64
}

// Compact reports whether the file uses the compact layout (32-bit
// offsets in entries and entry arrays).
func (h *Header) Compact() bool { return h.Incompatible&IncompatibleCompact != 0 }

// KeyedHash reports whether data hashes are SipHash keyed by the file id
// (else Jenkins lookup3).
func (h *Header) KeyedHash() bool { return h.Incompatible&IncompatibleKeyedHash != 0 }

// ParseHeader reads a journal file's header from its first bytes.
func ParseHeader(b []byte) (Header, error) {
	var h Header
	if len(b) < minHeaderSize {
		return h, corruptf("%d bytes are too few for a header", len(b))
	}
	if string(b[:8]) != Signature {
		return h, corruptf("no journal signature")
	}
	le := binary.LittleEndian
	h.Compatible = le.Uint32(b[8:])
	h.Incompatible = le.Uint32(b[12:])
	h.State = b[16]
	copy(h.FileID[:], b[24:40])
	copy(h.MachineID[:], b[40:56])
	copy(h.TailBootID[:], b[56:72])
	copy(h.SeqnumID[:], b[72:88])
	h.HeaderSize = le.Uint64(b[88:])
	h.ArenaSize = le.Uint64(b[96:])
	h.NObjects = le.Uint64(b[144:])
	h.NEntries = le.Uint64(b[152:])
	h.EntryArrayOffset = le.Uint64(b[176:])
	if len(b) >= 200 {
		h.HeadRealtime = le.Uint64(b[184:])
		h.TailRealtime = le.Uint64(b[192:])
	}
	if h.Incompatible&^incompatibleKnown != 0 {
		return h, fmt.Errorf("journal file uses features this reader does not know (incompatible flags %#x): written by a newer systemd", h.Incompatible&^incompatibleKnown)
	}
	if h.HeaderSize < minHeaderSize || h.HeaderSize > 1<<20 || h.HeaderSize%8 != 0 {
		return h, corruptf("header size %d", h.HeaderSize)
	}
	return h, nil
}

// File is an open journal file.
type File struct {
	Header Header
	r      *blockReader
	size   int64
	// arrays is the entry array chain: where each array is and how many
	// items it can hold; n the entries it lists (bounded by the header's
	// count and by what the chain can hold).
	arrays []arrayRef
	n      int
	// ChainError says why the entry array chain ended before the
	// header's entry count (a file being written, or damaged).
	ChainError error
}

type arrayRef struct {
	off   uint64
	cap   int
	first int // index of the array's first item in the whole chain
}

// Open reads the header and the entry array chain of a journal file of the
// given size. It reads through a small block cache: memory is bounded
// whatever the file's size.
func Open(r io.ReaderAt, size int64) (*File, error) {
	if size < minHeaderSize {
		return nil, corruptf("%d bytes is too short for a journal file", size)
	}
	f := &File{r: newBlockReader(r, size), size: size}
	hb, err := f.r.read(0, minHeaderSize)
	if err != nil {
		return nil, fmt.Errorf("reading the journal header: %w", err)
	}
	if f.Header, err = ParseHeader(hb); err != nil {
		return nil, err
	}
	if f.Header.HeaderSize >= 200 && int64(f.Header.HeaderSize) <= size {
		hb, err = f.r.read(0, 200)
		if err == nil {
			f.Header.HeadRealtime = binary.LittleEndian.Uint64(hb[184:])
			f.Header.TailRealtime = binary.LittleEndian.Uint64(hb[192:])
		}
	}
	f.ChainError = f.readChain()
	return f, nil
}

func (f *File) itemSize() uint64 {
	if f.Header.Compact() {
		return 4
	}
	return 8
}

// readChain walks the entry array chain from the header, recording each
// array's place and capacity, without reading the items.
func (f *File) readChain() error {
	want := f.Header.NEntries
	off := f.Header.EntryArrayOffset
	total := 0
	// What the chain read so far lists is readable, whatever stops it.
	defer func() { f.n = int(min(uint64(total), want)) }()
	var prev uint64
	for off != 0 && uint64(total) < want {
		if len(f.arrays) >= maxArrays {
			return corruptf("entry array chain longer than %d arrays", maxArrays)
		}
		if off <= prev || off < f.Header.HeaderSize {
			return corruptf("entry array at %d does not follow the one at %d", off, prev)
		}
		typ, size, err := f.objectHeader(off)
		if err != nil {
			return err
		}
		if typ != ObjectEntryArray || size < arrayFixedSize {
			return corruptf("object at %d is not an entry array (type %d, size %d)", off, typ, size)
		}
		b, err := f.r.read(off+objectHeaderSize, 8)
		if err != nil {
			return err
		}
		next := binary.LittleEndian.Uint64(b)
		n := int((size - arrayFixedSize) / f.itemSize())
		f.arrays = append(f.arrays, arrayRef{off: off, cap: n, first: total})
		total += n
		prev, off = off, next
	}
	if uint64(total) < want {
		return corruptf("the entry array chain lists %d of the %d entries the header counts", total, want)
	}
	return nil
}

// objectHeader reads and checks an object's type and size.
func (f *File) objectHeader(off uint64) (typ uint8, size uint64, err error) {
	if off%8 != 0 {
		return 0, 0, corruptf("object offset %d is not aligned", off)
	}
	b, err := f.r.read(off, objectHeaderSize)
	if err != nil {
		return 0, 0, err
	}
	size = binary.LittleEndian.Uint64(b[8:])
	if size < objectHeaderSize || size > MaxObjectSize || off+size > uint64(f.size) {
		return 0, 0, corruptf("object at %d has size %d (file size %d)", off, size, f.size)
	}
	return b[0], size, nil
}

// Len is how many entries the entry array chain lists.
func (f *File) Len() int { return f.n }

// EntryOffset returns the offset of the i-th entry (0 is the oldest), or
// 0 when the chain's slot is empty (not yet written).
func (f *File) EntryOffset(i int) (uint64, error) {
	if i < 0 || i >= f.n {
		return 0, fmt.Errorf("entry %d out of range [0,%d)", i, f.n)
	}
	k := sort.Search(len(f.arrays), func(k int) bool { return f.arrays[k].first > i }) - 1
	a := f.arrays[k]
	is := f.itemSize()
	b, err := f.r.read(a.off+arrayFixedSize+uint64(i-a.first)*is, int(is))
	if err != nil {
		return 0, err
	}
	if is == 4 {
		return uint64(binary.LittleEndian.Uint32(b)), nil
	}
	return binary.LittleEndian.Uint64(b), nil
}

// Entry is one journal entry: its timestamps and where its fields are.
type Entry struct {
	Offset    uint64
	Seqnum    uint64
	Realtime  uint64 // µs since the epoch
	Monotonic uint64 // µs since boot
	BootID    [16]byte
	// Items are the entry's data objects: offset and (regular layout
	// only; 0 in compact files) the payload's hash.
	Items []Item
}

// Item is one field of an entry.
type Item struct {
	Offset uint64
	Hash   uint64
}

// Entry reads the entry object at off. Items reuses buf's storage.
func (f *File) Entry(off uint64, buf []Item) (Entry, error) {
	e := Entry{Offset: off}
	typ, size, err := f.objectHeader(off)
	if err != nil {
		return e, err
	}
	if typ != ObjectEntry || size < entryFixedSize {
		return e, corruptf("object at %d is not an entry (type %d, size %d)", off, typ, size)
	}
	b, err := f.r.read(off, int(size))
	if err != nil {
		return e, err
	}
	le := binary.LittleEndian
	e.Seqnum = le.Uint64(b[16:])
	e.Realtime = le.Uint64(b[24:])
	e.Monotonic = le.Uint64(b[32:])
	copy(e.BootID[:], b[40:56])
	items := b[entryFixedSize:]
	e.Items = buf[:0]
	if f.Header.Compact() {
		for len(items) >= 4 {
			e.Items = append(e.Items, Item{Offset: uint64(le.Uint32(items))})
			items = items[4:]
		}
	} else {
		for len(items) >= 16 {
			e.Items = append(e.Items, Item{Offset: le.Uint64(items), Hash: le.Uint64(items[8:])})
			items = items[16:]
		}
	}
	if len(items) != 0 {
		return e, corruptf("entry at %d has a partial item", off)
	}
	if e.Seqnum == 0 || e.Realtime == 0 {
		return e, corruptf("entry at %d has no sequence number or time (half written?)", off)
	}
	return e, nil
}

// DataHash returns the hash stored in the data object at off (the hash of
// its uncompressed payload).
func (f *File) DataHash(off uint64) (uint64, error) {
	typ, size, err := f.objectHeader(off)
	if err != nil {
		return 0, err
	}
	if typ != ObjectData || size < dataFixedSize {
		return 0, corruptf("object at %d is not a data object (type %d, size %d)", off, typ, size)
	}
	b, err := f.r.read(off+objectHeaderSize, 8)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

// Data returns the payload ("FIELD=value") of the data object at off,
// decompressed. The result may alias an internal buffer, valid until the
// next call on f; copy it to keep it.
func (f *File) Data(off uint64) ([]byte, error) {
	typ, size, err := f.objectHeader(off)
	if err != nil {
		return nil, err
	}
	fixed := uint64(dataFixedSize)
	if f.Header.Compact() {
		fixed += compactDataExtra
	}
	if typ != ObjectData || size < fixed {
		return nil, corruptf("object at %d is not a data object (type %d, size %d)", off, typ, size)
	}
	hb, err := f.r.read(off, objectHeaderSize)
	if err != nil {
		return nil, err
	}
	flags := hb[1]
	p, err := f.r.read(off+fixed, int(size-fixed))
	if err != nil {
		return nil, err
	}
	switch flags & (ObjectCompressedXZ | ObjectCompressedLZ4 | ObjectCompressedZSTD) {
	case 0:
		return p, nil
	case ObjectCompressedXZ:
		return decompressXZ(p, MaxPayload)
	case ObjectCompressedLZ4:
		return decompressLZ4(p, MaxPayload)
	case ObjectCompressedZSTD:
		return decompressZSTD(p, MaxPayload)
	}
	return nil, corruptf("data object at %d claims several compressions (flags %#x)", off, flags)
}

// blockReader reads a file through a direct-mapped cache of blocks:
// neighbouring objects cost one pread, memory is bounded (4 MiB, allocated
// as blocks are first used). Reading newest first jumps between an entry,
// its own data objects and the shared ones (host, unit, transport) written
// long before: with 1 MiB of 32 KiB blocks those evicted each other and
// preads were most of the time (test/bench/journal.sh: 16 KiB × 256 read twice
// as fast).
type blockReader struct {
	r       io.ReaderAt
	size    int64
	slots   [blockSlots]cacheBlock
	scratch []byte
}

const (
	blockSize  = 16 << 10
	blockSlots = 256
)

type cacheBlock struct {
	idx  int64 // block index + 1; 0 when empty
	data []byte
}

func newBlockReader(r io.ReaderAt, size int64) *blockReader {
	return &blockReader{r: r, size: size}
}

// read returns n bytes at off. The slice is valid until the next read.
func (b *blockReader) read(off uint64, n int) ([]byte, error) {
	if n < 0 || off > uint64(b.size) || uint64(n) > uint64(b.size)-off {
		return nil, corruptf("read of %d bytes at %d beyond the end of the file (%d bytes)", n, off, b.size)
	}
	o := int64(off)
	first, last := o/blockSize, (o+int64(n)-1)/blockSize
	if n == 0 {
		return nil, nil
	}
	if first == last {
		blk, err := b.block(first)
		if err != nil {
			return nil, err
		}
		s := o - first*blockSize
		if int64(len(blk)) < s+int64(n) {
			return nil, corruptf("file shrank while it was read")
		}
		return blk[s : s+int64(n)], nil
	}
	if n > MaxObjectSize+blockSize {
		return nil, corruptf("read of %d bytes is over the limit", n)
	}
	// Spanning blocks: read directly (a large object is read once).
	if cap(b.scratch) < n {
		b.scratch = make([]byte, n)
	}
	buf := b.scratch[:n]
	m, err := b.r.ReadAt(buf, o)
	if m < n {
		if err == nil || errors.Is(err, io.EOF) {
			return nil, corruptf("file shrank while it was read")
		}
		return nil, fmt.Errorf("reading the journal file: %w", err)
	}
	return buf, nil
}

func (b *blockReader) block(i int64) ([]byte, error) {
	s := &b.slots[i%blockSlots]
	if s.idx == i+1 {
		return s.data, nil
	}
	if s.data == nil {
		s.data = make([]byte, blockSize)
	}
	want := min(int64(blockSize), b.size-i*blockSize)
	m, err := b.r.ReadAt(s.data[:want], i*blockSize)
	if int64(m) < want {
		s.idx = 0
		if err == nil || errors.Is(err, io.EOF) {
			return nil, corruptf("file shrank while it was read")
		}
		return nil, fmt.Errorf("reading the journal file: %w", err)
	}
	s.idx = i + 1
	return s.data[:want], nil
}
