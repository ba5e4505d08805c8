package textfit

import (
	"bytes"
	"strings"
	"testing"
)

func TestWriterFits(t *testing.T) {
	long := "    " + strings.Repeat("ünïcode path/segment ", 10) + strings.Repeat("x", 100)
	cases := []struct {
		name  string
		in    string
		wrap  bool
		lines int // want at least this many output lines
	}{
		{"short", "a short line\n", false, 1},
		{"elided", long + "\n", false, 1},
		{"wrapped", long + "\n", true, 4},
		{"no newline", long, true, 4},
		{"trailing spaces", strings.Repeat(" ", 200) + "\n", false, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			w := NewWriter(&b, 40, c.wrap)
			if _, err := w.Write([]byte(c.in)); err != nil {
				t.Fatal(err)
			}
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			out := strings.TrimSuffix(b.String(), "\n")
			lines := strings.Split(out, "\n")
			if len(lines) < c.lines {
				t.Errorf("%d lines, want at least %d:\n%s", len(lines), c.lines, out)
			}
			for _, l := range lines {
				if Len(l) > 40 {
					t.Errorf("line of %d runes: %q", Len(l), l)
				}
			}
			if c.wrap {
				// Nothing lost: the words come back in order.
				if got, want := strings.Join(strings.Fields(out), ""), strings.Join(strings.Fields(c.in), ""); got != want {
					t.Errorf("wrapped text lost something:\n got %q\nwant %q", got, want)
				}
			}
			if c.name == "elided" && !strings.HasSuffix(lines[0], "…") {
				t.Errorf("elided line does not say so: %q", lines[0])
			}
		})
	}
}

func TestElide(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"abc", 3, "abc"},
		{"abcd", 3, "ab…"},
		{"ééééé", 4, "ééé…"},
		{"ab", 1, "a"[:0] + "…"},
	} {
		if got := Elide(c.in, c.n); got != c.want {
			t.Errorf("Elide(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}

func TestFill(t *testing.T) {
	long := "/var/lib/kubelet/plugins/kubernetes.io/csi/pv/pvc-0123456789abcdef/globalmount/and/more"
	for _, c := range []struct {
		text, first, rest string
		width             int
	}{
		{"a few short words that fit on two lines of thirty", "", "", 30},
		{"see " + long + " then go on", "  ", "     ", 40},
		{long, "", "    ", 30},
		{"a finding: " + long, "  3  ", "     ", 50},
	} {
		got := Fill(c.text, c.width, c.first, c.rest)
		for _, l := range strings.Split(got, "\n") {
			if len(l) > c.width {
				t.Errorf("Fill(%q): line of %d > %d: %q", c.text, len(l), c.width, l)
			}
			if strings.TrimSpace(l) == "" {
				t.Errorf("Fill(%q): an empty line:\n%s", c.text, got)
			}
		}
		if strings.Join(strings.Fields(got), "") != strings.Join(strings.Fields(c.first+c.text), "") {
			t.Errorf("Fill(%q) lost or added text:\n%s", c.text, got)
		}
	}
}

// Hang wraps a table's last column under itself, a trailing shell comment
// as a comment, and puts a comment that has no room beside its command on
// the line before it.
func TestHang(t *testing.T) {
	row := "cluster         unsupported  2.94s     0      0 bytes    not present on this node: no credential for the API server"
	got := Hang(row, 80)
	col := strings.Index(row, "not present")
	for i, l := range got[1:] {
		if Len(l) > 80 || strings.TrimLeft(l, " ") == l || len(l)-len(strings.TrimLeft(l, " ")) != col {
			t.Errorf("row line %d %q: not under the DETAIL column %d", i+2, l, col)
		}
	}
	cmd := "    nodesnap manifests rbac | kubectl apply -f -   # then run nodesnap as its pod: nodesnap manifests job"
	got = Hang(cmd, 80)
	if len(got) < 2 || !strings.HasPrefix(got[0], "    nodesnap manifests rbac | kubectl apply -f -   # then") {
		t.Fatalf("command with a comment: %q", got)
	}
	for _, l := range got[1:] {
		if !strings.HasPrefix(strings.TrimLeft(l, " "), "# ") || Len(l) > 80 {
			t.Errorf("a comment continued outside a comment: %q", l)
		}
	}
	long := "    nodesnap collect --kubeconfig /host/var/lib/rancher/rke2/agent/kubelet.kubeconfig   # RKE2's kubelet kubeconfig"
	got = Hang(long, 80)
	if got[0] != "    # RKE2's kubelet kubeconfig" || !strings.HasPrefix(got[1], "    nodesnap collect --kubeconfig") {
		t.Errorf("a comment with no room beside its command: %q", got)
	}
}
