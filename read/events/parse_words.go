package events

import "bytes"

// mayMatter is a cheap test for a record that may report an operation's
// outcome: most records of a log (syncs, probes, starts) do not, and are
// not taken apart.
func mayMatter(b []byte) bool {
	if klogWarnOrError(b) {
		return true
	}
	switch scan(&primary, b) {
	case wordCheap:
		return true
	case wordSuccess:
		// A success matters only for a storage operation.
		return scan(&ops, b) == wordOp
	}
	return false
}

// wordTable finds words in a record in one pass: each word is filed
// under its first two bytes, chosen rare, so that most bytes cost one
// array load.
type wordTable struct {
	index [1 << 16]uint8
	words [][]gramWord
}

// gramWord is a word of a table and its kind.
type gramWord struct {
	w    []byte
	kind uint8
}

const (
	wordNone = iota
	wordCheap
	wordSuccess
	wordOp
)

var primary, ops wordTable

// scan returns the kind of the first word in b that is not a success
// word, else wordSuccess when b holds one, else wordNone.
func scan(t *wordTable, b []byte) uint8 {
	found := uint8(wordNone)
	for i := 0; i+1 < len(b); i++ {
		g := t.index[uint16(b[i])<<8|uint16(b[i+1])]
		if g == 0 {
			continue
		}
		for _, w := range t.words[g] {
			if bytes.HasPrefix(b[i:], w.w) {
				if w.kind != wordSuccess {
					return w.kind
				}
				found = wordSuccess
			}
		}
	}
	return found
}

// add files words of a kind (at most 254 distinct first pairs).
func (t *wordTable) add(ws [][]byte, kind uint8) {
	if t.words == nil {
		t.words = [][]gramWord{nil}
	}
	for _, w := range ws {
		k := uint16(w[0])<<8 | uint16(w[1])
		if t.index[k] == 0 && len(t.words) < 255 {
			t.index[k] = uint8(len(t.words))
			t.words = append(t.words, nil)
		}
		if t.index[k] != 0 {
			t.words[t.index[k]] = append(t.words[t.index[k]], gramWord{w, kind})
		}
	}
}

func init() {
	primary.add(cheapWords, wordCheap)
	primary.add(successWords, wordSuccess)
	ops.add(opWords, wordOp)
}

var (
	// cheapWords are words of a failure or a request; each begins with
	// a rare pair of bytes.
	cheapWords = [][]byte{[]byte("ail"), []byte("rror"), []byte("RROR"), []byte("rpc"), []byte("/O "), []byte("efused"), []byte("busy"),
		[]byte("imed out"), []byte("xit status"), []byte("\"Error\":"), []byte("GRPC "), []byte("ERR"), []byte("enied"), []byte("csi.v"),
		[]byte("quests {"), []byte("ublishVolume"), []byte("tageVolume"), []byte("xpandVolume"), []byte("questID"), []byte("quest_id"),
		// mount(8)'s and umount(8)'s own failures, as a caller's log
		// quotes their output on lines of their own.
		[]byte("rong fs type"), []byte("ad superblock"), []byte("an't unmount"), []byte("an't mount"), []byte("nvalid argument"),
		// ENOTEMPTY as strerror writes it: a directory a teardown
		// removes that still holds something ("remove <dir>: directory
		// not empty").
		[]byte("ry not empty"),
		// multipathd's paths going down and up.
		[]byte("multipathd"),
		// the block layer failing a request past a device's end
		// (bio_check_eod: "attempt to access beyond end of device").
		[]byte("eyond end of device"),
		// a kernel driver's controller or host in trouble: an NVMe
		// command timed out ("timeout cid", the PCI driver's "timeout,
		// aborting"/"timeout, reset controller"), a fabrics reconnect,
		// a SCSI host's commands waiting or its reset.
		[]byte("imeout cid"), []byte("imeout, "), []byte("econnect"), []byte("esetting "), []byte("ill reset"), []byte("ommands to complete"),
		[]byte("iag reset"), []byte("ost reset"), []byte("ault_state"),
		// a fatal record of a writer that spells its level out
		// ("<FATAL>:", "FATAL:"), as klog's F header is read above.
		[]byte("FATAL")}
	successWords = [][]byte{[]byte("ucce"), []byte("kipp"), []byte("lready"), []byte("g to do"), []byte("ompleted"), []byte("has been")}
	// opWords are the words of a storage operation (a success of
	// anything else is not read).
	opWords = [][]byte{[]byte("ount"), []byte("tage"), []byte("ublish"), []byte("ttach"), []byte("etach"), []byte("olume"), []byte("SetUp"), []byte("TearDown"),
		[]byte("/dev/"), []byte("map"), []byte("Map"), []byte("ormat"), []byte("esize"), []byte("xpand"), []byte("ogin"), []byte("perational"),
		// a controller's or host's recovery ("Successfully reconnected",
		// "Reset successful for scsi0").
		[]byte("econnected"), []byte("eset ")}
)

// klogWarnOrError tells a record with a klog header of level E, W or F
// (fatal) near its start ("E1121 09:10:01.000000 ...").
func klogWarnOrError(b []byte) bool {
	head := b[:min(len(b), 160)]
	for i := 0; i+6 <= len(head); i++ {
		c := head[i]
		if (c == 'E' || c == 'W' || c == 'F') && (i == 0 || head[i-1] == ' ' || head[i-1] == '"') && IsDigits(head[i+1:i+5]) && head[i+5] == ' ' {
			return true
		}
	}
	return false
}
