package analyze_test

import (
	"bytes"
	"context"
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
