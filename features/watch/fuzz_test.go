package watch

import (
	"bytes"
	"strings"
	"testing"
)

// Every parser reads bytes of the node: none may panic, and none may keep
// more than it was given.

func FuzzParseTaskStat(f *testing.F) {
	for _, s := range []string{"1 (init) S 0 1", "17 (a) b) (c) D 3", "(", ")(", "1 () D -5"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := ParseTaskStat(b)
		if err == nil && len(st.Comm) > len(b) {
			t.Fatalf("comm longer than the line")
		}
	})
}

func FuzzParseKmsgRecord(f *testing.F) {
	for _, s := range []string{"6,1,2,-;hello\n K=V\n", ";", "1,,;", "6,18446744073709551615,0,-;x"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseKmsgRecord(b)
		if err == nil && (len(r.Message) > len(b) || bytes.Contains([]byte(r.Message), []byte{'\n'})) {
			t.Fatalf("message %q of %q", r.Message, b)
		}
	})
}

func FuzzParseMountinfo(f *testing.F) {
	for _, s := range []string{"22 1 8:1 / / rw - ext4 /dev/sda1 rw\n", "1 2 3 4 /a\\040b - - x y", "- - - - - - - - -", "\\\\\\"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, m := range ParseMountinfo(b) {
			if len(m.Point)+len(m.FSType)+len(m.Source) > len(b) {
				t.Fatalf("mount %+v longer than its input", m)
			}
		}
	})
}

func FuzzParseJournalJSON(f *testing.F) {
	for _, s := range []string{`{"__CURSOR":"c","MESSAGE":[1,2,300]}`, `{"__CURSOR":"c","MESSAGE":[[1],"x"]}`, `{}`, `[`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := ParseJournalJSON(b)
		if err == nil && e.Cursor == "" {
			t.Fatalf("%q read as %+v without a cursor", b, e)
		}
	})
}

func FuzzFailedChecks(f *testing.F) {
	f.Add([]byte("[-]a\n[+]b\n[-]"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if got := FailedChecks(b, 3); len(got) > 3 {
			t.Fatalf("%d checks, max 3", len(got))
		}
	})
}

func FuzzParseJournalCursor(f *testing.F) {
	for _, s := range []string{"s=0123456789abcdef0123456789abcdef;i=1a;b=00;m=ff;t=5f00;x=9", "t=", "s=;t=1", ";;", "t=ffffffffffffffffff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := parseJournalCursor(s)
		if err == nil && !strings.Contains(s, "t=") {
			t.Fatalf("%q read as %+v without a time", s, c)
		}
	})
}
