package report

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/test/skip"
)

// A real browser opens pages offline: each must draw something (not a
// blank page) and log nothing to the console (a script error, or a
// Content-Security-Policy refusal of something the page tried to load).
// In CI (CI=true) a missing chromium fails the test; elsewhere it is
// skipped. The screenshots are kept in artifactsDir (CI artifacts).
func TestPagesInChromium(t *testing.T) {
	skip.Short(t, "opens every page in chromium (about two minutes on two cores): the binary tier")
	bin, err := exec.LookPath("chromium")
	if err != nil {
		skip.Missing(t, "chromium is not installed (apt-get install chromium): pages not opened in a browser")
	}
	dir := t.TempDir()
	keep := artifactsDir(t)

	// The control: a page that runs a script and fetches an image must
	// be caught, or the check below proves nothing.
	bad := filepath.Join(dir, "control.html")
	if err := os.WriteFile(bad, []byte(`<!DOCTYPE html><html><head><meta http-equiv="Content-Security-Policy" content="default-src 'none'"></head><body><p>x</p><script>console.error("boom")</script></body></html>`), 0o600); err != nil {
		t.Fatal(err)
	}
	if console, _ := screenshot(t, bin, bad, filepath.Join(dir, "control.png")); len(console) == 0 {
		t.Fatal("chromium logged nothing for a page with a blocked script: its console cannot be read this way")
	}

	pages := map[string]func(t *testing.T) []byte{
		"diff-healthy-to-003": func(t *testing.T) []byte { return diffPageOf(t, "healthy", "incident003-cephfs-hung") },
		"fleet": func(t *testing.T) []byte {
			d := fleetDir(t, true)
			v, err := LoadFleet(context.Background(), d)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if err := WriteFleet(&buf, v); err != nil {
				t.Fatal(err)
			}
			return buf.Bytes()
		},
		"pictures": func(t *testing.T) []byte {
			_, page := render(t, writeBundle(t, graphFiles(t), nil))
			return page
		},
	}
	for _, name := range []string{"healthy", "incident003-cephfs-hung", "signatures"} {
		pages[name] = func(t *testing.T) []byte {
			_, page := render(t, writeBundle(t, fixtureFiles(t, name), nil))
			return page
		}
	}
	for name, build := range pages {
		t.Run(name, func(t *testing.T) {
			page := build(t)
			p := filepath.Join(dir, name+".html")
			if err := os.WriteFile(p, page, 0o600); err != nil {
				t.Fatal(err)
			}
			shot := filepath.Join(dir, name+".png")
			console, inked := screenshot(t, bin, p, shot)
			for _, l := range console {
				t.Errorf("console: %s", l)
			}
			if inked < 0.02 {
				t.Errorf("the page looks blank: %.1f%% of its pixels are not white", inked*100)
			}
			if keep != "" {
				if err := os.MkdirAll(keep, 0o755); err != nil {
					t.Fatal(err)
				}
				b, err := os.ReadFile(shot)
				if err == nil {
					err = os.WriteFile(filepath.Join(keep, name+".png"), b, 0o644)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// chromiumFlags start Debian's chromium headless and offline, with a new
// empty profile: no sandbox (CI runs as root), no GPU, no QUIC, no
// first-run, background, component-update or sync traffic, and a proxy
// that refuses every connection.
func chromiumFlags(t *testing.T) []string {
	return []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir(), "--hide-scrollbars", "--enable-logging=stderr", "--v=0", "--proxy-server=127.0.0.1:9"}
}

// artifactsDir is where the screenshots are kept: $NODESNAP_ARTIFACTS/report
// when set, test-artifacts/report in the checkout in CI (CI=true), and
// nowhere otherwise.
func artifactsDir(t *testing.T) string {
	if d := os.Getenv("NODESNAP_ARTIFACTS"); d != "" {
		return filepath.Join(d, "report")
	}
	if os.Getenv("CI") == "true" {
		abs, err := filepath.Abs(filepath.Join("..", "..", "test-artifacts", "report"))
		if err != nil {
			t.Fatal(err)
		}
		return abs
	}
	return ""
}

// screenshot opens page in headless chromium with the network off and
// returns its console lines and the share of the picture's pixels that
// are not white.
func screenshot(t *testing.T, bin, page, out string) ([]string, float64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, chromiumFlags(t)...)
	cmd.Args = append(cmd.Args, "--window-size=1100,1400", "--screenshot="+out, "file://"+page)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, stderr.String())
	}
	var console []string
	for _, l := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(l, ":CONSOLE") {
			console = append(console, l)
		}
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatalf("no screenshot: %v\n%s", err, stderr.String())
	}
	defer func() { _ = f.Close() }()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	b := img.Bounds()
	inked, all := 0, 0
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			r, g, bl, _ := img.At(x, y).RGBA()
			all++
			if r < 0xf000 || g < 0xf000 || bl < 0xf000 {
				inked++
			}
		}
	}
	return console, float64(inked) / float64(max(all, 1))
}
