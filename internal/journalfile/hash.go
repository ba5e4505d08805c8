package journalfile

import (
	"encoding/binary"
	"math/bits"
)

// Hash is the hash journald stores for a payload in this file: SipHash-2-4
// keyed by the file id where the header says KEYED_HASH, Jenkins lookup3
// (hashlittle2) otherwise. Comparing it with the hash an entry item or data
// object carries tells, without reading the payload, that a field cannot
// be the one looked for.
func (h *Header) Hash(payload []byte) uint64 {
	if h.KeyedHash() {
		return siphash24(payload, h.FileID)
	}
	return jenkinsHash64(payload)
}

// jenkinsHash64 is systemd's jenkins_hash64: Bob Jenkins' lookup3
// hashlittle2 with both seeds 0, primary result in the high half.
func jenkinsHash64(k []byte) uint64 {
	a := 0xdeadbeef + uint32(len(k))
	b, c := a, a
	rot := bits.RotateLeft32
	for len(k) > 12 {
		a += binary.LittleEndian.Uint32(k)
		b += binary.LittleEndian.Uint32(k[4:])
		c += binary.LittleEndian.Uint32(k[8:])
		// mix
		a -= c
		a ^= rot(c, 4)
		c += b
		b -= a
		b ^= rot(a, 6)
		a += c
		c -= b
		c ^= rot(b, 8)
		b += a
		a -= c
		a ^= rot(c, 16)
		c += b
		b -= a
		b ^= rot(a, 19)
		a += c
		c -= b
		c ^= rot(b, 4)
		b += a
		k = k[12:]
	}
	if len(k) == 0 {
		return uint64(c)<<32 | uint64(b)
	}
	var tail [12]byte
	copy(tail[:], k)
	a += binary.LittleEndian.Uint32(tail[0:])
	b += binary.LittleEndian.Uint32(tail[4:])
	c += binary.LittleEndian.Uint32(tail[8:])
	// final
	c ^= b
	c -= rot(b, 14)
	a ^= c
	a -= rot(c, 11)
	b ^= a
	b -= rot(a, 25)
	c ^= b
	c -= rot(b, 16)
	a ^= c
	a -= rot(c, 4)
	b ^= a
	b -= rot(a, 14)
	c ^= b
	c -= rot(b, 24)
	return uint64(c)<<32 | uint64(b)
}

// siphash24 is SipHash-2-4 with a 64-bit result, as systemd's siphash24.
func siphash24(m []byte, key [16]byte) uint64 {
	k0 := binary.LittleEndian.Uint64(key[0:])
	k1 := binary.LittleEndian.Uint64(key[8:])
	v0 := k0 ^ 0x736f6d6570736575
	v1 := k1 ^ 0x646f72616e646f6d
	v2 := k0 ^ 0x6c7967656e657261
	v3 := k1 ^ 0x7465646279746573
	rot := bits.RotateLeft64
	round := func() {
		v0 += v1
		v1 = rot(v1, 13)
		v1 ^= v0
		v0 = rot(v0, 32)
		v2 += v3
		v3 = rot(v3, 16)
		v3 ^= v2
		v0 += v3
		v3 = rot(v3, 21)
		v3 ^= v0
		v2 += v1
		v1 = rot(v1, 17)
		v1 ^= v2
		v2 = rot(v2, 32)
	}
	n := len(m)
	for len(m) >= 8 {
		w := binary.LittleEndian.Uint64(m)
		v3 ^= w
		round()
		round()
		v0 ^= w
		m = m[8:]
	}
	var last [8]byte
	copy(last[:], m)
	last[7] = byte(n)
	w := binary.LittleEndian.Uint64(last[:])
	v3 ^= w
	round()
	round()
	v0 ^= w
	v2 ^= 0xff
	round()
	round()
	round()
	round()
	return v0 ^ v1 ^ v2 ^ v3
}
