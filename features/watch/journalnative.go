package watch

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nodesnap/nodesnap/collectors/hostfs"
	"github.com/nodesnap/nodesnap/internal/journalfile"
)

// The native journal reader of the journal-signature signal: the journal
// files read by nodesnap itself (package journalfile), for an image that
// holds no journalctl (the DaemonSet's, FROM scratch). It runs in the
// watcher's worker like journalctl does.
//
// It follows the journal from its end without keeping files open between
// rounds: each round lists the journal directories again, skips the files
// whose newest entry (in the header) is older than the cursor, and reads
// the others newest first down to the cursor. A file rotated since the
// last round is found under its new name and its entries already seen are
// told by their sequence numbers; a file vacuumed away is simply no longer
// listed. The cursor is journalctl's own format (s=, i=, b=, m=, t=), so a
// watcher that switches readers resumes where the other stopped.

// maxNativeFiles bounds the journal files one round considers.
const maxNativeFiles = 1024

// nativeCursor is where the last round stopped: the newest entry read.
type nativeCursor struct {
	seqnumID [16]byte
	seqnum   uint64
	realtime uint64 // µs since the epoch
}

// parseJournalCursor reads the s=, i= and t= fields of a journalctl
// cursor ("s=<seqnum id>;i=<seqnum>;b=…;m=…;t=<realtime>;x=…", numbers in
// hex). t= is required: it bounds the read.
func parseJournalCursor(s string) (nativeCursor, error) {
	var c nativeCursor
	var haveT bool
	for _, kv := range strings.Split(s, ";") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return c, fmt.Errorf("journal cursor %q: %q is not KEY=VALUE", clip(s, 100), clip(kv, 40))
		}
		switch k {
		case "s":
			b, err := hex.DecodeString(v)
			if err != nil || len(b) != 16 {
				return c, fmt.Errorf("journal cursor %q: s= is not a 128-bit id", clip(s, 100))
			}
			copy(c.seqnumID[:], b)
		case "i", "t":
			n, err := strconv.ParseUint(v, 16, 64)
			if err != nil {
				return c, fmt.Errorf("journal cursor %q: %s= is not a hex number", clip(s, 100), k)
			}
			if k == "i" {
				c.seqnum = n
			} else {
				c.realtime, haveT = n, true
			}
		}
	}
	if !haveT {
		return c, fmt.Errorf("journal cursor %q has no time (t=)", clip(s, 100))
	}
	return c, nil
}

// formatJournalCursor writes a cursor journalctl's --after-cursor accepts.
func formatJournalCursor(e *journalfile.Entry, seqnumID [16]byte) string {
	return fmt.Sprintf("s=%x;i=%x;b=%x;m=%x;t=%x", seqnumID, e.Seqnum, e.BootID, e.Monotonic, e.Realtime)
}

// nativeJournalDirs are the directories searched: Dir, or the host's
// runtime and persistent journals under Root.
func nativeJournalDirs(rq JournalRequest) []string {
	if rq.Dir != "" {
		return []string{rq.Dir}
	}
	root := rq.Root
	if root == "" {
		root = "/"
	}
	return []string{filepath.Join(root, "run/log/journal"), filepath.Join(root, "var/log/journal")}
}

// openNative opens one journal file if it may hold entries at or after
// since: the header's newest entry time says so without reading the rest.
func openNative(p string, since uint64) (*os.File, *journalfile.File, error) {
	fh, size, err := hostfs.OpenRegular(p)
	if err != nil {
		return nil, nil, err
	}
	hb := make([]byte, 256)
	n, err := fh.ReadAt(hb, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		_ = fh.Close()
		return nil, nil, fmt.Errorf("reading %s: %w", p, err)
	}
	if h, err := journalfile.ParseHeader(hb[:n]); err == nil && n >= 200 && h.TailRealtime != 0 && h.TailRealtime < since {
		_ = fh.Close()
		return nil, nil, nil // older than the cursor: nothing new in it
	}
	f, err := journalfile.Open(fh, size)
	if err != nil {
		_ = fh.Close()
		return nil, nil, fmt.Errorf("%s: %w", p, err)
	}
	return fh, f, nil
}

// readJournalNative reads the entries of the units after the cursor (or
// since rq.Since on the first round): at most rq.Max, the newest, oldest
// first in the result, within rq.Timeout.
func readJournalNative(rq JournalRequest) (JournalResult, error) {
	res := JournalResult{Cursor: rq.After}
	m, err := journalfile.ParseMatch(unitMatches(rq.Units))
	if err != nil {
		return res, fmt.Errorf("journal units %q: %w", rq.Units, err)
	}
	var cur nativeCursor
	haveCur := false
	if rq.After != "" {
		if c, err := parseJournalCursor(rq.After); err == nil {
			cur, haveCur = c, true
		}
	}
	since := uint64(max(rq.Since.UnixMicro(), 0))
	if haveCur {
		since = cur.realtime
	}
	deadline := time.Now().Add(max(rq.Timeout, time.Second))
	dirs := nativeJournalDirs(rq)
	paths, problems := hostfs.ListJournalFiles(dirs, maxNativeFiles)
	if len(paths) == 0 {
		if len(problems) > 0 {
			return res, fmt.Errorf("no journal file could be listed: %s", strings.Join(problems, "; "))
		}
		return res, fmt.Errorf("no journal files in %s (without journalctl, the journal is read from its files: is the host's journal directory mounted?)", strings.Join(dirs, " or "))
	}
	var its []*journalfile.Iter
	var fhs []*os.File
	defer func() {
		for _, fh := range fhs {
			_ = fh.Close() // read-only: nothing to lose
		}
	}()
	var lastErr error
	for _, p := range paths {
		fh, f, err := openNative(p, since)
		if err != nil {
			// A file vacuumed or rotated between the listing and here.
			if !errors.Is(err, syscall.ENOENT) {
				lastErr = err
			}
			continue
		}
		if f == nil {
			continue
		}
		fhs = append(fhs, fh)
		its = append(its, journalfile.NewIter(f, &m, since, -1))
	}
	if len(its) == 0 && lastErr != nil {
		return res, lastErr
	}
	seen := func(e *journalfile.Entry, seqID [16]byte) bool {
		if !haveCur {
			return false
		}
		if seqID == cur.seqnumID {
			return e.Seqnum <= cur.seqnum
		}
		return e.Realtime <= cur.realtime
	}
	var (
		s        journalfile.Short
		newest   []JournalEntry // newest first
		bytes    int
		last     journalfile.Entry
		lastID   [16]byte
		anyRead  bool
		newestAt string
	)
	for len(newest) < rq.Max && bytes < journalMaxBytes && time.Now().Before(deadline) {
		i := journalfile.Newest(its)
		if i < 0 {
			break
		}
		e, _ := its[i].Peek()
		seqID := its[i].SeqnumID()
		if seen(e, seqID) {
			// Newest first: the rest of this file was read before.
			its = append(its[:i], its[i+1:]...)
			continue
		}
		// The same entry in two files (a copy journald left beside the
		// original) counts once.
		if anyRead && e.Seqnum == last.Seqnum && e.Realtime == last.Realtime && seqID == lastID {
			its[i].Next()
			continue
		}
		if !anyRead {
			newestAt = formatJournalCursor(e, seqID)
		}
		its[i].Short(e, &s)
		ident := string(s.Identifier)
		if ident == "" {
			ident = string(s.Comm)
		}
		je := JournalEntry{Identifier: ident, Message: clip(string(s.Message), 4000)}
		bytes += len(je.Message) + len(je.Identifier)
		newest = append(newest, je)
		last, lastID, anyRead = *e, seqID, true
		last.Items = nil
		its[i].Next()
	}
	if anyRead {
		res.Cursor = newestAt
	}
	slices.Reverse(newest) // oldest first
	res.Entries = newest
	return res, nil
}
