package analyze_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/read/analyze"
)

// Incident 002 in the current layout (every table in mounts/mountinfo.txt)
// gives the finding it gives in the older one, with the evidence line
// quoted from the tables file at its line in that file. The tables file is
// read before mounts.json (archive order), so the host's namespace is
// known from its header alone.
func TestMountinfoTablesLayout(t *testing.T) {
	const fx = "incident002-rbd-held-in-namespace"
	files := fixture(t, fx)
	tables, err := analyze.TablesFromFixture(fx)
	if err != nil {
		t.Fatal(err)
	}
	for name := range files {
		if strings.HasPrefix(name, layout.MountinfoPath) {
			delete(files, name)
		}
	}
	files["mounts/"+layout.MountinfoTablesFile] = tables
	mj := files[layout.MountsPath]
	for _, ns := range []string{"4026531840", "4026532601"} {
		mj = bytes.ReplaceAll(mj, []byte(`"ns/`+ns+`.mountinfo"`), []byte(`"`+layout.MountinfoTablesFile+`"`))
	}
	files[layout.MountsPath] = mj

	r, err := analyze.AnalyzeFile(context.Background(), makeBundle(t, files, bundle.Gzip), analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got []analyze.Finding
	for _, f := range r.Findings {
		if f.ID == "mount-held-in-foreign-namespace" {
			got = append(got, f)
		}
	}
	if len(got) != 1 || got[0].Subject != "250:0" {
		t.Fatalf("findings %+v, want one mount-held-in-foreign-namespace of 250:0", got)
	}
	const line = "2892 2729 250:0 / "
	i := bytes.Index(tables, []byte("\n"+line))
	if i < 0 {
		t.Fatalf("the fixture's table lacks %q", line)
	}
	wantN := bytes.Count(tables[:i+1], []byte("\n")) + 1
	var quoted []analyze.Line
	for _, e := range got[0].Evidence {
		if e.Path == "mounts/"+layout.MountinfoTablesFile {
			quoted = append(quoted, e.Lines...)
		}
		if strings.HasPrefix(e.Path, layout.MountinfoPath) {
			t.Errorf("evidence names %s, which this bundle does not have", e.Path)
		}
	}
	if len(quoted) != 1 || quoted[0].N != wantN || !strings.HasPrefix(quoted[0].Text, line) {
		t.Errorf("mountinfo evidence %+v, want line %d starting %q", quoted, wantN, line)
	}
	// The host's table (pseudo and root mounts only) gives no evidence.
	for k := range r.Findings {
		for _, e := range r.Findings[k].Evidence {
			for _, l := range e.Lines {
				if e.Path == "mounts/"+layout.MountinfoTablesFile && layout.IsMountinfoHeader([]byte(l.Text)) {
					t.Errorf("a header line quoted as evidence: %q", l.Text)
				}
			}
		}
	}
}

// byReference rewrites a tables file as the collector writes format 4
// when namespace ns's table is a copy of another's: a namespace copy
// (inode copyNS, every ID moved by 1000) in full just before it, and ns's
// own table as its header alone, naming that copy. With badIDs, ns's
// header gives one ID too few.
func byReference(t *testing.T, tables []byte, ns, copyNS uint64, badIDs bool) []byte {
	t.Helper()
	var out bytes.Buffer
	done := false
	layout.EachMountinfoTable(tables, func(h layout.MountinfoHeader, b []byte, err error) {
		if err != nil {
			t.Fatal(err)
		}
		if h.Inode != ns {
			out.WriteString(layout.FormatMountinfoHeader(h))
			out.Write(b)
			return
		}
		in := map[int]bool{}
		var ids []int
		for _, l := range bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
			id, _, _, ok := layout.CutMountIDs(l)
			if !ok {
				t.Fatalf("line %q", l)
			}
			in[id] = true
			ids = append(ids, id)
		}
		var cp bytes.Buffer
		var outside []int
		for _, l := range bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
			id, parent, rest, _ := layout.CutMountIDs(l)
			if in[parent] {
				parent += 1000
			} else {
				outside = append(outside, parent)
			}
			fmt.Fprintf(&cp, "%d %d %s\n", id+1000, parent, rest)
		}
		out.WriteString(layout.FormatMountinfoHeader(layout.MountinfoHeader{Inode: copyNS, PID: 900, TID: 900}))
		out.Write(cp.Bytes())
		runs := layout.MountIDRuns(ids)
		if badIDs {
			runs[len(runs)-1][1]--
			if runs[len(runs)-1][1] == 0 {
				runs = runs[:len(runs)-1]
			}
		}
		h.SameAs, h.IDs, h.Outside = copyNS, runs, outside
		out.WriteString(layout.FormatMountinfoHeader(h))
		done = true
	})
	if !done {
		t.Fatalf("no table of namespace %d", ns)
	}
	return out.Bytes()
}

// Incident 002 with the holder namespace's table written by reference
// (format 4) gives the same finding, quoting the holder's line as rebuilt
// with its own IDs, numbered as the copy's line it comes from; a
// reference whose IDs do not fit its copy is said (unreadable-evidence),
// never read as a namespace that mounts nothing silently.
func TestMountinfoTablesByReference(t *testing.T) {
	const fx = "incident002-rbd-held-in-namespace"
	tables, err := analyze.TablesFromFixture(fx)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []bool{false, true} {
		files := fixture(t, fx)
		for name := range files {
			if strings.HasPrefix(name, layout.MountinfoPath) {
				delete(files, name)
			}
		}
		ref := byReference(t, tables, 4026532601, 4026539999, bad)
		files["mounts/"+layout.MountinfoTablesFile] = ref
		mj := files[layout.MountsPath]
		for _, ns := range []string{"4026531840", "4026532601"} {
			mj = bytes.ReplaceAll(mj, []byte(`"ns/`+ns+`.mountinfo"`), []byte(`"`+layout.MountinfoTablesFile+`"`))
		}
		files[layout.MountsPath] = mj
		r, err := analyze.AnalyzeFile(context.Background(), makeBundle(t, files, bundle.Gzip), analyze.Options{})
		if err != nil {
			t.Fatal(err)
		}
		var got []analyze.Finding
		unreadable := 0
		for _, f := range r.Findings {
			switch f.ID {
			case "mount-held-in-foreign-namespace":
				got = append(got, f)
			case "unreadable-evidence":
				if f.Subject == "mounts/"+layout.MountinfoTablesFile {
					unreadable++
				}
			}
		}
		if len(got) != 1 || got[0].Subject != "250:0" {
			t.Fatalf("bad IDs %v: findings %+v, want one mount-held-in-foreign-namespace of 250:0", bad, got)
		}
		var quoted []analyze.Line
		for _, e := range got[0].Evidence {
			if e.Path == "mounts/"+layout.MountinfoTablesFile {
				quoted = append(quoted, e.Lines...)
			}
		}
		if bad {
			if unreadable != 1 || len(quoted) != 0 {
				t.Errorf("a reference that does not fit: %d unreadable findings, quoted %+v; want 1 and none", unreadable, quoted)
			}
			continue
		}
		const line, copyLine = "2892 2729 250:0 / ", "3892 3729 250:0 / "
		i := bytes.Index(ref, []byte("\n"+copyLine))
		if i < 0 {
			t.Fatalf("the copy lacks %q", copyLine)
		}
		wantN := bytes.Count(ref[:i+1], []byte("\n")) + 1
		if unreadable != 0 || len(quoted) != 1 || quoted[0].N != wantN || !strings.HasPrefix(quoted[0].Text, line) {
			t.Errorf("mountinfo evidence %+v (%d unreadable), want line %d starting %q", quoted, unreadable, wantN, line)
		}
	}
}
