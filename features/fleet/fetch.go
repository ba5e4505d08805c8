package fleet

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/nodesnap/nodesnap/features/fleet/podspec"
)

// CollectResult is what `nodesnap collect --output json` prints: the
// fields the fleet uses.
type CollectResult struct {
	Path       string   `json:"path"`
	HostPath   string   `json:"host_path"`
	Size       int64    `json:"size"`
	SHA256     string   `json:"sha256"`
	Status     string   `json:"status"`
	Missing    []string `json:"missing"`
	ExitStatus int      `json:"exit_status"`
	// Upload is the upload's outcome, when the pod uploaded the bundle
	// (fleet collect --to).
	Upload *UploadResult `json:"upload,omitempty"`
}

// UploadResult is what collect's result says of its upload.
type UploadResult struct {
	OK         bool   `json:"ok"`
	StatusCode int    `json:"status_code,omitempty"`
	Error      string `json:"error,omitempty"`
	Attempts   int    `json:"attempts,omitempty"`
}

// resultLogLimit bounds what is read of the collect container's log: the
// result is its last line, a few kilobytes.
const resultLogLimit = 1 << 20

// ParseCollectResult finds collect's JSON result in its log: the last
// JSON object starting a line (collect indents it over many lines) with a
// bundle path; stderr's notes may come before it.
func ParseCollectResult(log []byte) (*CollectResult, error) {
	for end := len(log); end > 0; {
		start := bytes.LastIndexByte(log[:end], '{')
		if start < 0 {
			break
		}
		end = start
		if start > 0 && log[start-1] != '\n' {
			continue
		}
		var r CollectResult
		if json.NewDecoder(bytes.NewReader(log[start:])).Decode(&r) != nil || r.Path == "" {
			continue
		}
		if err := r.check(); err != nil {
			return nil, err
		}
		return &r, nil
	}
	return nil, errors.New("the collect container's log has no result (nodesnap collect --output json)")
}

// check refuses a result that names no bundle or has no valid checksum.
func (r *CollectResult) check() error {
	if len(r.SHA256) != 64 || strings.Trim(strings.ToLower(r.SHA256), "0123456789abcdef") != "" {
		return fmt.Errorf("collect's result has no valid sha256 (%q)", r.SHA256)
	}
	if r.Size < 0 {
		return fmt.Errorf("collect's result has a negative size %d", r.Size)
	}
	name := path.Base(r.Path)
	if name == "." || name == "/" || name == ".." || (!strings.HasSuffix(name, ".tar.gz") && !strings.HasSuffix(name, ".tar.zst")) {
		return fmt.Errorf("collect's result names no bundle (%q)", r.Path)
	}
	r.SHA256 = strings.ToLower(r.SHA256)
	return nil
}

// ErrChecksum: the bytes that arrived are not the bundle the node wrote.
var ErrChecksum = errors.New("checksum mismatch")

// fetch copies the bundle res names out of the pod into dir as
// <node><ext>: streamed through exec into a temporary file while hashed,
// renamed into place only when its size and sha256 are the node's. It
// returns the file's name.
func fetch(ctx context.Context, o *Options, pod, node string, res *CollectResult) (string, error) {
	name := path.Base(res.Path)
	ext := ".tar.gz"
	if strings.HasSuffix(name, ".tar.zst") {
		ext = ".tar.zst"
	}
	final := node + ext
	f, err := os.CreateTemp(o.OutputDir, "."+final+".*.partial")
	if err != nil {
		return "", fmt.Errorf("creating the bundle's file: %w", err)
	}
	tmp := f.Name()
	keep := false
	defer func() {
		if !keep {
			_ = f.Close()      // discarded anyway
			_ = os.Remove(tmp) // nothing half-written is left
		}
	}()
	h := sha256.New()
	cw := &countWriter{}
	w := io.MultiWriter(f, h, cw)
	if o.TransitHook != nil {
		w = o.TransitHook(node, w)
	}
	var stderr limitedBuffer
	err = o.PodIO.Exec(ctx, o.Namespace, pod, podspec.HoldContainer, []string{podspec.Binary, "bundle-cat", name}, w, &stderr)
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg != "" {
			err = fmt.Errorf("%w: %s", err, msg)
		}
		return "", fmt.Errorf("copying %s from pod %s after %d bytes: %w", name, pod, cw.n, err)
	}
	got := hex.EncodeToString(h.Sum(nil))
	if cw.n != res.Size || got != res.SHA256 {
		return "", fmt.Errorf("%w: the node wrote %s (%d bytes, sha256 %s), %d bytes arrived with sha256 %s; not saved",
			ErrChecksum, name, res.Size, res.SHA256, cw.n, got)
	}
	if err := f.Sync(); err != nil {
		return "", fmt.Errorf("writing %s: %w", final, err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("writing %s: %w", final, err)
	}
	if err := os.Rename(tmp, filepath.Join(o.OutputDir, final)); err != nil {
		return "", fmt.Errorf("writing %s: %w", final, err)
	}
	keep = true
	return final, nil
}

type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

// limitedBuffer keeps the first 4 KiB written to it (a command's stderr).
type limitedBuffer struct{ b bytes.Buffer }

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := 4096 - l.b.Len(); room > 0 {
		l.b.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string { return l.b.String() }
