package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/engine/supervisor"
	"github.com/nodesnap/nodesnap/test/skip"
)

var ansi = regexp.MustCompile(`\x1b\[[0-9;]*[A-Za-z]`)

// screenLines turns what a terminal was sent into its lines, escape
// sequences dropped, so that the last line naming a collector is the last
// state the terminal showed for it.
func screenLines(raw string) []string {
	s := ansi.ReplaceAllString(raw, "")
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if i := strings.LastIndexByte(strings.TrimRight(l, "\r"), '\r'); i >= 0 {
			l = l[i+1:]
		}
		out = append(out, strings.TrimRight(l, "\r "))
	}
	return out
}

func lastLineOf(lines []string, name string) string {
	re := regexp.MustCompile(`^ \S+ ` + regexp.QuoteMeta(name) + ` `)
	last := ""
	for _, l := range lines {
		if re.MatchString(l) {
			last = l
		}
	}
	return last
}

// On a terminal (a pseudo-terminal here) stderr shows a live line per
// collector, redrawn in place while it runs, and ends with each
// collector's final state; stdout says what to attach.
func TestCollectProgressOnTerminal(t *testing.T) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		skip.Missing(t, "no pseudo-terminal: %v", err)
	}
	defer ptmx.Close()
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 40, Cols: 120}); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	cmd := nodesnapCmd(t, []string{"NODESNAP_TEST_SLOW=1500ms", "TERM=xterm"}, "collect", "--output-dir", out, "--only", "host,test-slow,test-exit,test-sleep", "--timeout", "60s")
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, tty
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close() // the child has it; EOF (EIO) on the master once it exits
	var screen bytes.Buffer
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, err := io.Copy(&screen, ptmx)
		if err != nil && !errors.Is(err, syscall.EIO) {
			t.Errorf("reading the terminal: %v", err)
		}
	}()
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		t.Fatal("collect did not finish")
	}
	wg.Wait()
	if code := cmd.ProcessState.ExitCode(); code != exitPartial {
		t.Errorf("exit %d, want %d", code, exitPartial)
	}
	raw := screen.String()
	if !strings.Contains(raw, "\x1b[2K") || !regexp.MustCompile(`\x1b\[\d+A`).MatchString(raw) {
		t.Errorf("no in-place redraw on the terminal:\n%q", truncate(raw, 2000))
	}
	lines := screenLines(raw)
	if !regexp.MustCompile(`test-slow\s+running\s+\d+\.\ds`).MatchString(strings.Join(lines, "\n")) {
		t.Errorf("test-slow was never shown running with its elapsed time:\n%s", strings.Join(lines, "\n"))
	}
	for name, want := range map[string]string{"host": "ok", "test-slow": "ok", "test-exit": "error", "test-sleep": "timeout"} {
		l := lastLineOf(lines, name)
		if !regexp.MustCompile(regexp.QuoteMeta(name) + `\s+` + want + `\s+\d+\.\ds`).MatchString(l) {
			t.Errorf("final line of %s is %q, want it %s with its duration", name, l, want)
		}
	}
	if l := lastLineOf(lines, "test-exit"); !strings.Contains(l, "status 7") {
		t.Errorf("test-exit's final line %q does not say why", l)
	}
	p := bundlePath(t, out)
	if !strings.HasPrefix(stdout.String(), "Attach this file to the ticket:\n"+p+"\n") {
		t.Errorf("stdout:\n%s", stdout.String())
	}
	if strings.Contains(stdout.String(), "\x1b") {
		t.Errorf("escape sequences on stdout (not a terminal): %q", stdout.String())
	}
}

// Not a terminal: plain lines, one per collector as it ends, no escapes.
func TestCollectProgressPlain(t *testing.T) {
	out := t.TempDir()
	r := runNodesnap(t, 60*time.Second, []string{fastEnv, "TERM=xterm"}, "collect", "--output-dir", out, "--only", "test-slow,test-exit", "--timeout", "30s")
	if r.code != exitPartial {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if strings.Contains(r.stderr, "\x1b") {
		t.Errorf("escape sequences in plain progress: %q", r.stderr)
	}
	for _, re := range []string{`(?m)^test-slow\s+ok\s+\d+\.\ds$`, `(?m)^test-exit\s+error\s+\d+\.\ds\s+.*status 7`} {
		if !regexp.MustCompile(re).MatchString(r.stderr) {
			t.Errorf("stderr does not match %s:\n%s", re, r.stderr)
		}
	}
}

// --quiet prints one line, the bundle's path, and nothing on stderr unless
// the bundle is missing something.
func TestCollectQuiet(t *testing.T) {
	out := t.TempDir()
	r := runNodesnap(t, 60*time.Second, []string{fastEnv}, append([]string{"collect", "-q", "--output-dir", out}, fastRun...)...)
	if r.code != exitOK {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if p := bundlePath(t, out); r.stdout != p+"\n" {
		t.Errorf("stdout %q, want just %q", r.stdout, p+"\n")
	}
	if r.stderr != "" {
		t.Errorf("stderr %q, want nothing", r.stderr)
	}
	// Partial: still the one line on stdout; the exit status tells, and
	// stderr says what is missing (evidence loss is never silent).
	r = runNodesnap(t, 60*time.Second, nil, "collect", "-q", "--output-dir", t.TempDir(), "--only", "test-exit", "--timeout", "30s")
	if r.code != exitPartial || strings.Count(r.stdout, "\n") != 1 || r.stderr != "nodesnap: bundle is partial: test-exit (error); the manifest says why (nodesnap inspect shows it)\n" {
		t.Errorf("partial quiet run: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
}

// --output json is one JSON object that agrees with the bundle on disk.
func TestCollectJSON(t *testing.T) {
	out := t.TempDir()
	r := runNodesnap(t, 60*time.Second, []string{fastEnv}, "collect", "--output-dir", out, "--output", "json", "--only", "test-slow,test-exit", "--timeout", "30s")
	if r.code != exitPartial {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	var res collectResult
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&res); err != nil {
		t.Fatalf("stdout is not the JSON result: %v\n%s", err, r.stdout)
	}
	if dec.More() {
		t.Errorf("more than one JSON value on stdout")
	}
	p := bundlePath(t, out)
	sum, data := fileSHA256(t, p)
	if res.Path != p || res.Size != int64(len(data)) || res.SHA256 != sum {
		t.Errorf("json says %s, %d bytes, %s; the bundle is %s, %d bytes, %s", res.Path, res.Size, res.SHA256, p, len(data), sum)
	}
	if res.Status != "partial" || res.ExitStatus != exitPartial {
		t.Errorf("status %q exit_status %d, want partial and %d", res.Status, res.ExitStatus, exitPartial)
	}
	if res.Collectors["test-slow"] != bundle.StatusOK || res.Collectors["test-exit"] != bundle.StatusError || len(res.Collectors) != 2 {
		t.Errorf("collectors %v", res.Collectors)
	}
	if res.Upload != nil || res.Removed != nil {
		t.Errorf("upload/removed present without --upload/--keep: %+v", res)
	}
	if r.stderr != "" {
		t.Errorf("stderr %q: --output json prints the error only through the exit status", r.stderr)
	}
}

// The live display on its own: rows for every selected collector from the
// start, the final state of each from the manifest (also for the ones
// that never started), lines never wider than the terminal.
func TestLiveProgressUnit(t *testing.T) {
	var buf syncBuffer
	p := newLiveProgress(&buf, []string{"alpha", "beta", "gamma"}, time.Minute, func() int { return 40 })
	p.update(supervisor.Progress{Collector: "alpha", Phase: "start", Deadline: time.Now().Add(time.Minute)})
	p.update(supervisor.Progress{Collector: "alpha", Phase: "done", Status: bundle.StatusTimeout, Elapsed: 2 * time.Second, Error: strings.Repeat("long reason ", 20)})
	p.update(supervisor.Progress{Phase: "writing"})
	p.finish(&bundle.Manifest{Status: "partial", Collectors: []bundle.CollectorResult{
		{Name: "alpha", Status: bundle.StatusTimeout, DurationSeconds: 2, Error: "did not finish"},
		{Name: "beta", Status: bundle.StatusOK, DurationSeconds: 0.5},
		{Name: "gamma", Status: bundle.StatusSkipped, Error: "the global deadline was reached before it could start"},
	}})
	p.update(supervisor.Progress{Collector: "beta", Phase: "start"}) // after finish: ignored
	raw := buf.String()
	for _, l := range strings.Split(ansi.ReplaceAllString(raw, ""), "\n") {
		l = strings.TrimLeft(l, "\r")
		if n := len([]rune(l)); n > 39 {
			t.Errorf("line of %d characters on a 40-column terminal: %q", n, l)
		}
	}
	lines := screenLines(raw)
	for name, want := range map[string]string{"alpha": "timeout", "beta": "ok", "gamma": "skipped"} {
		if l := lastLineOf(lines, name); !strings.Contains(l, want) {
			t.Errorf("%s ends as %q, want %s", name, l, want)
		}
	}
	footer := -1
	for i, l := range lines {
		if strings.Contains(l, "done in") {
			footer = i
		}
	}
	if footer < 0 || !strings.Contains(lines[footer], "partial") {
		t.Fatalf("no footer saying done and partial:\n%s", strings.Join(lines, "\n"))
	}
	// The frame cut gamma's reason at 40 columns; below it, every cut
	// reason is printed whole (wrapped), so nothing a user needs is lost.
	below := strings.Join(strings.Fields(strings.Join(lines[footer+1:], " ")), " ")
	if !strings.HasPrefix(below, "why:") || !strings.Contains(below, "gamma: the global deadline was reached before it could start") {
		t.Errorf("the cut reasons are not printed whole below the frame: %q", below)
	}
	if strings.Contains(below, "beta") {
		t.Errorf("an ok collector is listed among the reasons: %q", below)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Off a terminal (a pipe, a file, a ticket), `nodesnap collectors` cuts
// nothing: every collector's GATHERS text is there whole, wrapped within
// 80 columns, where it used to end in "…" at the 80th.
func TestCollectorsOffTerminalWhole(t *testing.T) {
	r := runNodesnap(t, time.Minute, []string{"COLUMNS="}, "collectors")
	if r.code != exitOK {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if strings.Contains(r.stdout, "…") {
		t.Errorf("off a terminal, text was cut:\n%s", r.stdout)
	}
	flat := strings.Join(strings.Fields(r.stdout), " ")
	for _, c := range collectorInfos() {
		if want := strings.Join(strings.Fields(c.Gathers), " "); !strings.Contains(flat, want) {
			t.Errorf("%s: GATHERS %q is not whole in the output", c.Name, want)
		}
	}
	for _, l := range strings.Split(r.stdout, "\n") {
		if n := len([]rune(l)); n > 80 {
			t.Errorf("line of %d characters off a terminal: %q", n, l)
		}
	}
}

// A collector's error can quote the node (a mount point named by whoever
// made it): collect's progress shows it escaped, on a terminal and off
// one, never as a terminal command (here OSC 52, which writes the
// clipboard, and a screen clear).
func TestProgressEscapesNodeText(t *testing.T) {
	hostile := "stat /mnt/\x1b]52;c;ZXZpbA==\x07x\x1b[2J: hung"
	var live syncBuffer
	p := newLiveProgress(&live, []string{"mounts"}, time.Minute, func() int { return 200 })
	p.update(supervisor.Progress{Collector: "mounts", Phase: "done", Status: bundle.StatusPartial, Error: hostile})
	p.finish(&bundle.Manifest{Status: "partial", Collectors: []bundle.CollectorResult{{Name: "mounts", Status: bundle.StatusPartial, Error: hostile}}})
	var plain bytes.Buffer
	plainProgress(&plain)(supervisor.Progress{Collector: "mounts", Phase: "done", Status: bundle.StatusPartial, Error: hostile})
	for name, out := range map[string]string{"live": ansi.ReplaceAllString(live.String(), ""), "plain": plain.String()} {
		if strings.Contains(out, "\x1b]52") || strings.Contains(out, "\x1b[2J") || strings.Contains(out, "\x07") {
			t.Errorf("%s progress wrote the node's escape sequences raw: %q", name, out)
		}
		if !strings.Contains(out, "/mnt/") {
			t.Errorf("%s progress lost the error: %q", name, out)
		}
	}
}
