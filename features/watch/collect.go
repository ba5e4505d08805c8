package watch

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/engine/isolate"
)

// TriggerEnv carries the trigger, as JSON, from the watcher to the
// `nodesnap collect` it starts, which records it in the manifest.
const TriggerEnv = "NODESNAP_WATCH_TRIGGER"

// uploadEnv is collect's environment variable for --upload: the URL (a
// pre-signed one holds a credential) never shows in a process list.
const uploadEnv = "NODESNAP_UPLOAD_URL"

// TriggerFromEnv is the trigger a watcher passed to this collection, or
// nil for a collection run by hand.
func TriggerFromEnv() (*bundle.Trigger, error) {
	v := os.Getenv(TriggerEnv)
	if v == "" {
		return nil, nil
	}
	var t bundle.Trigger
	if err := json.Unmarshal([]byte(v), &t); err != nil {
		return nil, fmt.Errorf("$%s does not hold a trigger of nodesnap watch (unset it to collect by hand): %w", TriggerEnv, err)
	}
	if t.Name == "" {
		return nil, fmt.Errorf("$%s names no trigger (unset it to collect by hand)", TriggerEnv)
	}
	return &t, nil
}

// stopGrace is how long an interrupted collection gets to write its
// bundle before it is killed: within the 30 s a Kubernetes pod and a
// systemd unit give by default.
const stopGrace = 25 * time.Second

// ChildCollector runs each collection as `nodesnap collect` in a child
// process: the very code path of a collection by hand (output directory,
// lock, --keep, --upload, redaction), its memory returned to the node
// when it ends, and a crash of it never the watcher's. Its messages go to
// log.
func ChildCollector(log io.Writer) Collector {
	return func(ctx context.Context, cfg Config, t bundle.Trigger) Collection {
		args := []string{"collect", "--output", "json", "--root", cfg.Root, "--output-dir", cfg.OutputDir}
		if cfg.Keep > 0 {
			args = append(args, "--keep", strconv.Itoa(cfg.Keep))
		}
		args = append(args, cfg.CollectArgs...)
		tj, err := json.Marshal(t)
		if err != nil {
			return Collection{Status: "failed", Err: fmt.Errorf("encoding the trigger: %w", err)}
		}
		env := make([]string, 0, len(os.Environ())+2)
		for _, e := range os.Environ() {
			if strings.HasPrefix(e, TriggerEnv+"=") || (cfg.Upload != "" && strings.HasPrefix(e, uploadEnv+"=")) {
				continue
			}
			env = append(env, e)
		}
		env = append(env, TriggerEnv+"="+string(tj))
		if cfg.Upload != "" {
			env = append(env, uploadEnv+"="+cfg.Upload)
		}
		out := &limitedBuffer{max: 1 << 20}
		c, err := isolate.Start(isolate.Spec{Args: args, Env: env, Stdout: out, Stderr: log})
		if err != nil {
			return Collection{Status: "failed", Err: err}
		}
		deadline := time.NewTimer(cfg.CollectDeadline)
		defer deadline.Stop()
		select {
		case <-c.Done():
		case <-ctx.Done():
			// SIGTERM to the watcher: the collection stops and writes
			// the bundle of what it gathered, marked interrupted.
			c.Signal(syscall.SIGTERM)
			select {
			case <-c.Done():
			case <-time.After(stopGrace):
				c.Kill(false)
				return Collection{Status: "failed", Err: fmt.Errorf("the interrupted collection did not end within %s and was killed", stopGrace)}
			}
		case <-deadline.C:
			c.Kill(false)
			return Collection{Status: "failed", Err: fmt.Errorf("the collection did not end within collect_deadline (%s) and was killed", cfg.CollectDeadline)}
		}
		var res struct {
			Path   string `json:"path"`
			Status string `json:"status"`
		}
		_ = json.Unmarshal(out.Bytes(), &res)
		switch code := c.ExitCode(); code {
		case 0, 3:
			return Collection{Path: res.Path, Status: res.Status}
		case 4:
			return Collection{Status: "locked", Err: fmt.Errorf("another nodesnap run was collecting into %s", cfg.OutputDir)}
		case 5:
			return Collection{Path: res.Path, Status: "upload-failed", Err: fmt.Errorf("the bundle %s was written but not uploaded", res.Path)}
		default:
			return Collection{Status: "failed", Err: fmt.Errorf("nodesnap collect exited with status %d", code)}
		}
	}
}
