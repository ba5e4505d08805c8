//go:build !nofleet

package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/engine/supervisor"
	"github.com/nodesnap/nodesnap/features/fleet"
)

// Every `nodesnap fleet collect|analyze` example in the README, the docs
// and the command's own help parses with the real flags (--help first, so
// nothing runs).
func TestFleetExamplesParse(t *testing.T) {
	var lines []string
	for _, f := range []string{"../../README.md", "../../docs/kubernetes.md"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, strings.Split(string(b), "\n")...)
	}
	var help bytes.Buffer
	root := newRootCommand()
	root.SetOut(&help)
	root.SetArgs([]string{"fleet", "collect", "--help"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	lines = append(lines, strings.Split(help.String(), "\n")...)
	re := regexp.MustCompile(`nodesnap fleet (collect|analyze)((?:\s+[^\s|;&>#` + "`" + `]+)*)`)
	n := 0
	for _, l := range lines {
		for _, m := range re.FindAllStringSubmatch(l, -1) {
			args := []string{"fleet", m[1], "--help"}
			for _, a := range strings.Fields(m[2]) {
				if strings.ContainsAny(a, "<>…") || a == "DIR" {
					a = "PLACEHOLDER"
				}
				args = append(args, a)
			}
			var out bytes.Buffer
			root := newRootCommand()
			root.SetOut(&out)
			root.SetErr(&out)
			root.SetArgs(args)
			if err := root.Execute(); err != nil {
				t.Errorf("nodesnap %s: %v\n%s", strings.Join(args, " "), err, out.String())
			}
			n++
		}
	}
	if n < 8 {
		t.Errorf("only %d fleet examples found", n)
	}
}

// The summary names every node with its status, its bundle or its reason,
// and the counts.
func TestFleetSummary(t *testing.T) {
	rep := &fleet.Report{Nodes: []fleet.NodeResult{
		{Node: "node-1", Status: fleet.StatusOK, Bundle: "node-1.tar.gz", Durations: fleet.Durations{Total: 31.25}},
		{Node: "node-2", Status: fleet.StatusImagePull, Reason: "the node cannot get the image: ImagePullBackOff"},
		{Node: "node-3", Status: fleet.StatusPartial, Bundle: "node-3.tar.gz", Reason: "the bundle is partial: journal: timed out"},
	}, Counts: map[fleet.Status]int{fleet.StatusOK: 1, fleet.StatusImagePull: 1, fleet.StatusPartial: 1}}
	var b bytes.Buffer
	writeFleetSummary(&b, rep, "case-1")
	for _, want := range []string{
		"node-1  ok                    31.2s  node-1.tar.gz",
		"node-2  image-pull-failure     0.0s  the node cannot get the image: ImagePullBackOff",
		"node-3  partial                0.0s  node-3.tar.gz (the bundle is partial: journal: timed out)",
		"3 nodes: 1 ok, 1 partial, 1 image-pull-failure",
		"or name one they can pull with --image",
		"case-1/fleet.json",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, b.String())
		}
	}
	var plain bytes.Buffer
	p := newFleetProgress(&plain, false)
	p.update(fleet.NodeResult{Node: "node-2", Phase: fleet.PhasePending})
	p.update(fleet.NodeResult{Node: "node-2", Phase: fleet.PhaseDone, Status: fleet.StatusTimeout, Reason: "the per-node deadline passed", Durations: fleet.Durations{Total: 300}})
	p.update(fleet.NodeResult{Node: "node-2", Phase: fleet.PhaseDone, Status: fleet.StatusTimeout})
	p.finish()
	if got := plain.String(); got != "nodesnap: node-2: timeout after 300.0s: the per-node deadline passed\n" {
		t.Errorf("plain progress %q; want one line when the node ends", got)
	}
}

// Usage mistakes are found before any kubeconfig is read: exit status 2.
func TestFleetCollectUsage(t *testing.T) {
	for _, args := range [][]string{
		{"fleet", "collect"},
		{"fleet", "collect", "--all", "-l", "a=b"},
		{"fleet", "collect", "n1", "--all"},
		{"fleet", "collect", "-l", "a==,"},
		{"fleet", "collect", "--all", "--output", "yaml"},
		{"fleet", "collect", "--all", "--node-timeout", "0s"},
		{"fleet", "collect", "--all", "--to", "s3://Not_A_Bucket/case/"},
		{"fleet", "collect", "--all", "--kube-api-qps", "0"},
		{"fleet", "collect", "--all", "--to", "s3://bucket/case/?x=1"},
		{"fleet", "analyze"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		root := newRootCommand()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(append(args, "--kubeconfig", "/nonexistent"))
		if args[1] == "analyze" {
			root.SetArgs(args)
		}
		code := exitCode(&out, root.ExecuteContext(ctx))
		cancel()
		if code != exitUsage {
			t.Errorf("nodesnap %s: exit %d, want %d\n%s", strings.Join(args, " "), code, exitUsage, out.String())
		}
	}
}

// On a terminal: a line per running node first, then finished ones, a
// count line, each redraw over the last one, within the terminal's height.
func TestFleetLiveProgress(t *testing.T) {
	var b bytes.Buffer
	p := &fleetProgress{w: &b, live: true, size: func() (int, int) { return 60, 5 },
		rows: map[string]fleet.NodeResult{}, started: map[string]time.Time{}}
	for _, n := range []fleet.NodeResult{
		{Node: "node-a", Phase: fleet.PhaseCollecting},
		{Node: "node-b", Phase: fleet.PhaseDone, Status: fleet.StatusOK, Bundle: "node-b.tar.gz", Durations: fleet.Durations{Total: 12}},
		{Node: "node-c", Phase: fleet.PhaseWaiting},
		{Node: "node-d", Phase: fleet.PhaseDone, Status: fleet.StatusTimeout, Reason: strings.Repeat("x", 100)},
		{Node: "node-e", Phase: fleet.PhaseDone, Status: fleet.StatusOK},
	} {
		p.update(n)
	}
	p.redraw()
	first := b.String()
	lines := strings.Split(strings.TrimSuffix(first, "\n"), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "node-a") || !strings.Contains(lines[0], "collecting") ||
		!strings.Contains(lines[1], "node-b") || !strings.Contains(lines[2], "3/5 nodes done") {
		t.Fatalf("first draw (3 lines in a 5-line terminal):\n%q", first)
	}
	for _, l := range lines {
		if len([]rune(strings.TrimPrefix(l, "\x1b[2K"))) > 59 {
			t.Errorf("line wider than the terminal: %q", l)
		}
	}
	b.Reset()
	p.redraw()
	if !strings.HasPrefix(b.String(), "\x1b[3A") {
		t.Errorf("the redraw does not go back over the last one: %q", b.String())
	}
}

// A binary built without a release version names no image that exists:
// fleet collect asks for --image (and says how to build one) instead of
// defaulting to a tag make image never produces.
func TestDefaultImage(t *testing.T) {
	for _, tc := range []struct {
		version, want string
		usage         bool
	}{
		{"v1.2.3", DefaultImageRepo + ":v1.2.3", false},
		{"b427018", DefaultImageRepo + ":b427018", false}, // make build from an untagged commit, as make image tags it
		{"devel", "", true},
		{"devel-0123456789ab+dirty", "", true},
		{"", "", true},
	} {
		got, err := defaultImage(tc.version)
		if tc.usage {
			var u *supervisor.UsageError
			if !errors.As(err, &u) || !strings.Contains(err.Error(), "--image") || !strings.Contains(err.Error(), "make image") {
				t.Errorf("%q: %q, %v; want a usage error naming --image and make image", tc.version, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %q, %v; want %q", tc.version, got, err, tc.want)
		}
	}
}

// Node names and reasons come from the API server: the summary shows them
// escaped, so a pod status message cannot forge a line or command the
// terminal.
func TestFleetSummaryEscapes(t *testing.T) {
	rep := &fleet.Report{Nodes: []fleet.NodeResult{
		{Node: "node-1", Status: fleet.StatusFailed, Reason: "failed\n   node-9  ok  0.1s  forged.tar.gz\x1b]52;c;ZXZpbA==\x07"},
	}, Counts: map[fleet.Status]int{fleet.StatusFailed: 1}}
	var b bytes.Buffer
	writeFleetSummary(&b, rep, "case-1")
	out := b.String()
	if strings.Contains(out, "\x1b") || strings.Contains(out, "\x07") || strings.Contains(out, "\n   node-9") {
		t.Errorf("the summary wrote the API's text raw:\n%q", out)
	}
	if !strings.Contains(out, "forged.tar.gz") {
		t.Errorf("the reason was lost:\n%q", out)
	}
}
