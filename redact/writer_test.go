package redact

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// redactAll runs in through a Writer with the given maxLine, writing in
// chunks of the given size.
func redactAll(t testing.TB, r *Redactor, in []byte, maxLine, chunk int) ([]byte, map[string]int) {
	t.Helper()
	var out bytes.Buffer
	w := r.NewWriter(&out)
	w.maxLine = maxLine
	for len(in) > 0 {
		n := min(chunk, len(in))
		if _, err := w.Write(in[:n]); err != nil {
			t.Fatal(err)
		}
		in = in[n:]
		if c, _ := w.memory(); c > maxLine {
			t.Fatalf("input buffer grew to %d bytes, over maxLine %d", c, maxLine)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes(), w.Counts()
}

// TestLongLines: one JSON line far longer than maxLine (the kubelet's /pods
// is one), with secrets everywhere, including across the places it must be
// cut. None may survive.
func TestLongLines(t *testing.T) {
	rnd := rand.New(rand.NewSource(1))
	var b strings.Builder
	b.WriteString(`{"items":[`)
	for i := 0; i < 400; i++ {
		pad := strings.Repeat("x", rnd.Intn(300))
		fmt.Fprintf(&b, `{"id":%d,"pad":"%s","password":"PWSECRET-%d","env":[{"name":"DB_PASSWORD","value":"ENVSECRET-%d"}],"h":"Authorization: Bearer HDRSECRET-%d"},`, i, pad, i, i, i)
	}
	// A value longer than a piece: cut by force, finished in the next one.
	big := strings.Repeat("QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo", 3000)
	fmt.Fprintf(&b, `{"token":"%s"},`, big)
	// A PEM key in a JSON string, longer than a piece.
	body := strings.Repeat(`MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n`, 2000)
	fmt.Fprintf(&b, `{"key":"-----BEGIN PRIVATE KEY-----\n%s-----END PRIVATE KEY-----\n","after":"kept"}`, body)
	b.WriteString("]}\n")
	in := []byte(b.String())
	secret := regexp.MustCompile(`(PW|ENV|HDR)SECRET-\d+|QUJDREVGR0hJSktMTU5PUFFS|MIIEvQIBADANBgkqhkiG9w0B`)
	for _, maxLine := range []int{MaxLine, 4096, 1000} {
		for _, chunk := range []int{len(in), 65536, 333} {
			out, counts := redactAll(t, Default(), in, maxLine, chunk)
			if m := secret.Find(out); m != nil {
				i := bytes.Index(out, m)
				t.Errorf("maxLine %d chunk %d: %q survives: ...%s...", maxLine, chunk, m, out[max(0, i-80):min(len(out), i+40)])
			}
			if !bytes.Contains(out, []byte(`"after":"kept"}]}`)) || !bytes.Contains(out, []byte(`{"id":399,"pad":"`)) {
				t.Errorf("maxLine %d chunk %d: lost what follows the secrets", maxLine, chunk)
			}
			if maxLine == MaxLine && counts["secret-field"] != 401 {
				t.Errorf("whole line: counts %v", counts)
			}
		}
	}
}

// TestBinaryInput: binary data (no newlines, NULs, every byte value) goes
// through in bounded pieces, unchanged where it holds no secret.
func TestBinaryInput(t *testing.T) {
	rnd := rand.New(rand.NewSource(2))
	in := make([]byte, 5<<20)
	rnd.Read(in)
	for i := range in {
		if in[i] == '\n' {
			in[i] = 0
		}
	}
	copy(in[3<<20:], "\x00password=BINSECRET-1\x00")
	out, _ := redactAll(t, Default(), in, MaxLine, 1<<20)
	if bytes.Contains(out, []byte("BINSECRET-1")) {
		t.Error("secret in binary input survived")
	}
	if d := len(out) - len(in); d < -64 || d > 64 {
		t.Errorf("binary input changed size by %d bytes", d)
	}
	// Before the secret, the bytes are the same (random data has no
	// keyword long enough to trigger a rule, with this seed).
	if !bytes.Equal(out[:1<<20], in[:1<<20]) {
		t.Error("binary bytes changed")
	}
}

// TestMemoryBound: a stream with no newline at all never makes the Writer
// hold more than maxLine bytes of input, however it is written.
func TestMemoryBound(t *testing.T) {
	chunk := bytes.Repeat([]byte("abcdefghij"), 100_000)
	var sink countWriter
	w := Default().NewWriter(&sink)
	for i := 0; i < 40; i++ {
		if _, err := w.Write(chunk); err != nil {
			t.Fatal(err)
		}
		in, out := w.memory()
		if in > MaxLine || out > 4*MaxLine {
			t.Fatalf("after %d MB: input buffer %d, output buffer %d", i+1, in, out)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if sink.n != int64(40*len(chunk)) {
		t.Errorf("wrote %d bytes, want %d", sink.n, 40*len(chunk))
	}
}

type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

type failWriter struct{ after int }

var errDisk = errors.New("no space left on device")

func (f *failWriter) Write(p []byte) (int, error) {
	if f.after <= 0 {
		return 0, errDisk
	}
	f.after--
	return len(p), nil
}

func TestWriterErrors(t *testing.T) {
	w := Default().NewWriter(&failWriter{after: 1})
	if _, err := w.Write([]byte("first\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("second\n")); !errors.Is(err, errDisk) {
		t.Errorf("write error not returned: %v", err)
	}
	if _, err := w.Write([]byte("third\n")); !errors.Is(err, errDisk) {
		t.Errorf("write error not sticky: %v", err)
	}
	if err := w.Close(); !errors.Is(err, errDisk) {
		t.Errorf("Close: %v", err)
	}
	var out bytes.Buffer
	w = Default().NewWriter(&out)
	_ = w.Close()
	if _, err := w.Write([]byte("late")); err == nil {
		t.Error("write after close accepted")
	}
}

// TestWriterDetails: line endings, a last line without newline, and
// counts read while another goroutine writes.
func TestWriterDetails(t *testing.T) {
	r := Default()
	for in, want := range map[string]string{
		"password=abc\r\ntoken: xyz\r\n": "password=[REDACTED]\r\ntoken: [REDACTED]\r\n",
		"no newline token=abc":           "no newline token=[REDACTED]",
		"":                               "",
		"\n\n":                           "\n\n",
		"-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC": "-----BEGIN PRIVATE KEY-----\n[REDACTED]\n",
	} {
		if got, _ := r.String(in); got != want {
			t.Errorf("%q: got %q want %q", in, got, want)
		}
	}
	var out bytes.Buffer
	w := r.NewWriter(&out)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 1000; i++ {
			_, _ = w.Write([]byte("password=x\n"))
		}
	}()
	for i := 0; i < 100; i++ {
		_ = w.Counts()
	}
	wg.Wait()
	_ = w.Close()
	if w.Counts()["secret-assignment"] != 1000 {
		t.Errorf("counts %v", w.Counts())
	}
}

// pathologicalUnits are lines made of one keyword repeated. Each of these
// took seconds to minutes per MiB before the rules learned to skip keywords
// inside a value being redacted, to expand a key once, and to look for a PEM
// END once. (A node's logs can hold anything a workload prints; the
// collector must not stall on it.)
var pathologicalUnits = []string{
	"-----BEGIN A PRIVATE KEY----- x ", "token", "token=", "authorization:", `"token":"`,
	"eyJ", "AQ", "://", "&sig=", `"data":{`, "password: |", "a:b:", "1.2.3.4.", "::",
	"aa:bb:", "--token ", "Bearer ", `\"token\":\"`, "name: X_PASSWORD, value:", b64Begin,
	"password=x ", "10.0.0.1 ",
}

// TestPathologicalLines: a MiB of one keyword repeated is redacted to the
// end, within the writer's memory bound (redactAll checks it), and its
// output is what a second pass leaves as it is. How long it takes, and how
// that grows with the line, is BenchmarkPathologicalLines' to show: no
// wall-clock limit here.
func TestPathologicalLines(t *testing.T) {
	for _, unit := range pathologicalUnits {
		line := bytes.Repeat([]byte(unit), (1<<20)/len(unit))
		for i, r := range fuzzRedactors() {
			out, _ := redactAll(t, r, line, MaxLine, len(line))
			if len(out) == 0 {
				t.Errorf("%q repeated over 1 MiB: redactor %d wrote nothing", unit, i)
				continue
			}
			again, _ := redactAll(t, r, out, MaxLine, len(out))
			if !bytes.Equal(again, out) {
				t.Errorf("%q repeated over 1 MiB: redactor %d's output changes on a second pass (%d bytes, then %d)", unit, i, len(out), len(again))
			}
		}
	}
}

// BenchmarkPathologicalLines: the cost of each pathological line at 256 KiB
// and 1 MiB; linear cost shows as the same MB/s at both sizes.
//
//	go test -run '^$' -bench PathologicalLines -benchtime 3x ./redact
func BenchmarkPathologicalLines(b *testing.B) {
	r := Default()
	for ui, unit := range pathologicalUnits {
		for _, size := range []int{256 << 10, 1 << 20} {
			line := bytes.Repeat([]byte(unit), size/len(unit))
			b.Run(fmt.Sprintf("unit=%d/size=%dKiB", ui, size>>10), func(b *testing.B) {
				b.SetBytes(int64(len(line)))
				for b.Loop() {
					_, _ = redactAll(b, r, line, MaxLine, len(line))
				}
			})
		}
	}
}
