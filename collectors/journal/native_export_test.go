package journal

import "fmt"

// JournalNativeReadForTest reads what the native journal op returns for
// dirs and matches, calling it as the collector does, chunk by chunk with
// the cursors it returns (chunk bytes each), and returns the text oldest
// first, the number of calls and the problems reported.
func JournalNativeReadForTest(dirs, matches []string, sinceUS uint64, chunk int) (string, int, []string, error) {
	rq := journalNativeRequest{Dirs: dirs, Matches: matches, SinceUS: sinceUS, Max: chunk, TimeoutMS: 60_000}
	var entries [][]byte
	var problems []string
	for calls := 1; calls < 1<<20; calls++ {
		v, err := journalNativeOp(rq)
		if err != nil {
			return "", calls, problems, err
		}
		r := v.(journalNativeResult)
		problems = append(problems, r.Problems...)
		// Newest first: split into entries (continuation lines start
		// with a blank) and reverse.
		text, err := unpackText(r.Data)
		if err != nil {
			return "", calls, problems, err
		}
		if string(text) != string(r.Text) {
			return "", calls, problems, fmt.Errorf("the packed chunk does not unpack to its text")
		}
		w := newEntryWindow(int64(len(text))+1, false, true)
		_, _ = w.Write(text)
		w.finish(true)
		var chunkEntries [][]byte
		w.each(func(e []byte) bool { chunkEntries = append(chunkEntries, e); return true })
		entries = append(entries, chunkEntries...)
		if r.Done {
			var out []byte
			for i := len(entries) - 1; i >= 0; i-- {
				out = append(out, entries[i]...)
			}
			return string(out), calls, problems, nil
		}
		rq.Dirs, rq.Files = nil, r.Files
	}
	return "", 0, problems, fmt.Errorf("the native reader never finished")
}
