package naming

import (
	"strings"
	"testing"
	"time"
)

func TestNameString(t *testing.T) {
	at := time.Date(2026, 11, 21, 10, 15, 0, 0, time.FixedZone("CET", 3600))
	for _, c := range []struct {
		n    Name
		want string
	}{
		{Name{Host: "node1", Time: at}, "nodesnap-node1-20261121T091500Z.tar.gz"},
		{Name{Host: "we/ird host", Time: at, Format: "tar.zst"}, "nodesnap-we_ird_host-20261121T091500Z.tar.zst"},
		{Name{Host: "", Time: at, Seq: 3, CaseID: "01234", Label: "db-up", Encrypted: true}, "nodesnap-unknown-20261121T091500Z-3.case-01234.db-up.tar.gz.age"},
	} {
		if got := c.n.String(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.n, got, c.want)
		}
	}
}

func TestCheckTag(t *testing.T) {
	for _, ok := range []string{"", "01234567", "db_upgrade-2", strings.Repeat("a", 64)} {
		if err := CheckTag("label", ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"a b", "../x", "a.b", "é", strings.Repeat("a", 65), "x\n"} {
		if err := CheckTag("case-id", bad); err == nil || !strings.Contains(err.Error(), "--case-id") {
			t.Errorf("%q: %v, want an error naming --case-id", bad, err)
		}
	}
	if err := CheckTag("label", "case-9"); err == nil {
		t.Errorf("a label starting with case- was accepted: it would read as a case id")
	}
	// Every accepted tag gives a name that parses back to it.
	n := Name{Host: "h", Time: time.Unix(0, 0), CaseID: "01234", Label: "db_upgrade-2"}
	if back, ok := ParseName(n.String()); !ok || back.CaseID != n.CaseID || back.Label != n.Label {
		t.Errorf("%q parses as %+v, %v", n.String(), back, ok)
	}
}

func TestParseName(t *testing.T) {
	for _, c := range []struct {
		name string
		ok   bool
		host string
		seq  int
	}{
		{"nodesnap-node1-20261121T101500Z.tar.gz", true, "node1", 0},
		{"nodesnap-node-1-20261121T101500Z.tar.zst", true, "node-1", 0},
		{"nodesnap-node-1-20261121T101500Z-3.tar.gz", true, "node-1", 3},
		{"nodesnap-a-20261121T101500Z-20261121T101501Z.tar.gz", true, "a-20261121T101500Z", 0},
		{"nodesnap-node1-20261121T101500Z.tar.gz.tmp", false, "", 0},
		{".nodesnap-123-abc-nodesnap-node1-20261121T101500Z.tar.gz.tmp", false, "", 0},
		{"nodesnap-node1-20261121T101500Z.tar", false, "", 0},
		{"nodesnap-node1-2026112T101500Z.tar.gz", false, "", 0},
		{"nodesnap-node1-20261399T101500Z.tar.gz", false, "", 0},
		{"nodesnap--20261121T101500Z.tar.gz", false, "", 0},
		{"mynodesnap-node1-20261121T101500Z.tar.gz", false, "", 0},
		{"nodesnap-node1-20261121T101500Z.tar.gz.sha256", false, "", 0},
		{"nodesnap-node1-20261121T101500Z.case-01234.tar.gz", true, "node1", 0},
		{"nodesnap-node1-20261121T101500Z-2.case-01234.db-up.tar.zst.age", true, "node1", 2},
		{"nodesnap-node1-20261121T101500Z.db_up.tar.gz", true, "node1", 0},
		{"nodesnap-node1-20261121T101500Z.tar.gz.age", true, "node1", 0},
		{"nodesnap-node1-20261121T101500Z.a.b.tar.gz", false, "", 0},
		{"nodesnap-node1-20261121T101500Z.case-.tar.gz", false, "", 0},
		{"nodesnap-node1-20261121T101500Z-0.tar.gz", false, "", 0},
		{"nodesnap-no de-20261121T101500Z.tar.gz", false, "", 0},
	} {
		n, ok := ParseName(c.name)
		if ok != c.ok || (ok && (n.Host != c.host || n.Seq != c.seq)) {
			t.Errorf("ParseName(%q) = %+v, %v; want host %q seq %d ok %v", c.name, n, ok, c.host, c.seq, c.ok)
		}
	}
}

func FuzzParseName(f *testing.F) {
	f.Add("nodesnap-node1-20261121T101500Z.tar.gz")
	f.Add("nodesnap-n-20261121T101500Z-99.tar.zst")
	f.Add("nodesnap-n-20261121T101500Z-2.case-77.lbl.tar.gz.age")
	f.Fuzz(func(t *testing.T, s string) {
		n, ok := ParseName(s)
		if !ok {
			return
		}
		// Whatever parses is the name nodesnap gives a bundle of that
		// host, time, case, label and format: one definition both ways.
		if n.String() != s {
			t.Errorf("ParseName(%q) = %+v, which names %q", s, n, n.String())
		}
	})
}
