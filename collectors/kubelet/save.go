package kubelet

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/engine/isolate"
	"github.com/nodesnap/nodesnap/redact"
)

// How an answer becomes a bundle file: within the collector's room, bounded in memory, redacted.

// excerpt returns the first bytes of an error answer, scrubbed.
func (k *kubeletRun) excerpt(r io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(r, 512))
	s := strings.Join(strings.Fields(string(b)), " ")
	return k.scrub(s)
}

// save writes an answer into the bundle; it returns how many bytes came,
// whether the answer was cut by a size cap, and whether a file was kept.
func (k *kubeletRun) save(ep kubeletEndpoint, body io.Reader) (n int64, truncated, kept bool, err error) {
	n, truncated, f, err := k.saveWithin(ep, body, k.maxBytes)
	return n, truncated, f != nil, err
}

// poolWriter takes each write's bytes from the pool: what the collector's
// cap leaves once its own record (requests.json, the notes) is set aside.
// Answers arriving at once share it as they write, first come first
// served; past it the rest of an answer is dropped and the answer marked
// cut, so a flooding kubelet fills the data, never the record.
type poolWriter struct {
	k   *kubeletRun
	w   io.Writer
	cut bool
}

func (p *poolWriter) Write(b []byte) (int, error) {
	take := int64(len(b))
	p.k.poolMu.Lock()
	if p.k.pool >= 0 {
		take = min(take, p.k.pool)
		p.k.pool -= take
	}
	p.k.poolMu.Unlock()
	if take < int64(len(b)) {
		p.cut = true
	}
	if take > 0 {
		if _, err := p.w.Write(b[:take]); err != nil {
			return 0, err
		}
	}
	// Dropped bytes are "written": the producer is not broken mid-stream.
	return len(b), nil
}

func (k *kubeletRun) saveWithin(ep kubeletEndpoint, body io.Reader, limit int64) (int64, bool, *collectors.File, error) {
	lr := &kubeletCountingReader{r: io.LimitReader(body, limit+1)}
	// JSON is re-indented (pods.json also redacted as a whole) in memory;
	// past kubeletJSONInMemory it is streamed as it came instead, so one
	// huge answer costs a bounded buffer, not its size several times.
	if ep.json {
		head, err := io.ReadAll(io.LimitReader(lr, kubeletJSONInMemory+1))
		if err != nil {
			return lr.n, false, nil, err
		}
		if int64(len(head)) > kubeletJSONInMemory {
			if ep.pods {
				return lr.n, true, nil, fmt.Errorf("the pods answer is over %d MiB; not kept, since its environment values can only be removed from a whole document", kubeletJSONInMemory>>20)
			}
			return k.stream(ep, io.MultiReader(bytes.NewReader(head), lr), lr, limit)
		}
		data := head
		out := data
		n := 0
		if ep.pods {
			k.env.RecordEnvironment(PodEnv(data))
			red, cnt, perr := RedactPodSecrets(data)
			n = cnt
			if perr != nil {
				// Not JSON (cut short, or an error page): env values cannot be
				// told apart, so it is not kept.
				return lr.n, false, nil, fmt.Errorf("pods answer is not JSON (%v); not kept, since environment values could not be removed", perr)
			}
			out = red
			if n > 0 {
				k.env.Notef("pods.json: %d environment variable values and last-applied-configuration annotations replaced by %s", n, redact.Marker)
			}
		} else {
			var buf bytes.Buffer
			if json.Indent(&buf, data, "", "  ") == nil {
				out = buf.Bytes()
			}
		}
		f, err := k.env.Create(ep.file, collectors.MaxBytes(limit))
		if err != nil {
			return lr.n, false, nil, err
		}
		if ep.pods {
			f.CountRedactions(RedactionPodEnv, n)
		}
		pw := &poolWriter{k: k, w: f}
		sw := newKubeletScrubber(pw, k.token)
		_, werr := sw.Write(out)
		if cerr := sw.Close(); werr == nil {
			werr = cerr
		}
		f.CountRedactions(RedactionKubeletToken, sw.count)
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		return lr.n, f.Truncated() || pw.cut || lr.n > limit, f, werr
	}
	return k.stream(ep, lr, lr, limit)
}

// Bounds of the kubelet collector's own memory and record.
const (
	// kubeletJSONInMemory is the largest JSON answer re-indented (or, for
	// pods.json, redacted) in memory.
	kubeletJSONInMemory = 32 << 20
	// kubeletRecordReserve is kept of the collector's cap for
	// requests.json and the notes.
	kubeletRecordReserve = 1 << 20
)

// stream copies an answer into the bundle as it comes (redacted unless
// binary), within limit bytes.
func (k *kubeletRun) stream(ep kubeletEndpoint, src io.Reader, lr *kubeletCountingReader, limit int64) (int64, bool, *collectors.File, error) {
	opts := []collectors.FileOption{collectors.MaxBytes(limit)}
	if ep.binary {
		opts = append(opts, collectors.Binary(kubeletPprofReason))
	}
	f, err := k.env.Create(ep.file, opts...)
	if err != nil {
		return 0, false, nil, err
	}
	pw := &poolWriter{k: k, w: f}
	var w io.Writer = pw
	var sw *kubeletScrubber
	if !ep.binary {
		sw = newKubeletScrubber(pw, k.token)
		w = sw
	}
	var head *isolate.HeadBuffer
	if ep.name == "healthz" {
		head = &isolate.HeadBuffer{Max: 64 << 10}
		src = io.TeeReader(lr, head)
	}
	_, rerr := io.Copy(w, src)
	if head != nil {
		k.noteFailingChecks(head.String())
	}
	if sw != nil {
		if cerr := sw.Close(); rerr == nil {
			rerr = cerr
		}
		f.CountRedactions(RedactionKubeletToken, sw.count)
	}
	if cerr := f.Close(); rerr == nil {
		rerr = cerr
	}
	return lr.n, f.Truncated() || pw.cut || lr.n > limit, f, rerr
}

// noteFailingChecks puts healthz's failing checks ("[-]syncloop failed")
// in the manifest, where a reader of `nodesnap inspect` sees them first.
func (k *kubeletRun) noteFailingChecks(body string) {
	var failing []string
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "[-]") && len(failing) < 20 {
			failing = append(failing, strings.TrimSpace(line))
		}
	}
	if len(failing) > 0 {
		k.env.Notef("kubelet healthz reports failing checks: %s", k.scrub(strings.Join(failing, "; ")))
	}
}

type kubeletCountingReader struct {
	r io.Reader
	n int64
}

func (c *kubeletCountingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
