package events

import "testing"

// parsedAs parses line with a fresh parser and reports, under the case's
// name, a record read when none should be or missed when one should.
// check is true when there is an event to look into further: the record
// was read, as wanted.
func parsedAs(t *testing.T, name, line string, wantOK bool) (ev Event, check bool) {
	t.Helper()
	ev, ok := NewParser(ref).Parse([]byte(line))
	if ok != wantOK {
		t.Errorf("%s: ok=%v, want %v (%+v)", name, ok, wantOK, ev)
		return ev, false
	}
	return ev, ok
}
