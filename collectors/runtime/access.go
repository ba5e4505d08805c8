package runtime

// Reaching a runtime: its programs, sockets and files, each under a deadline.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/collectors/hostfs"
	"github.com/nodesnap/nodesnap/engine/isolate"
	"github.com/nodesnap/nodesnap/internal/human"
)

// findProgram looks prog up in nodesnap's own PATH, as the isolation layer
// will, but stat()ing each candidate in a worker: a PATH entry may sit on
// a network mount.
func findProgram(ctx context.Context, env *collectors.Env, prog string) (string, bool) {
	progMu.Lock()
	defer progMu.Unlock()
	if r, ok := progCache[prog]; ok {
		return r, r != ""
	}
	p, ok := lookPath(ctx, env, prog)
	progCache[prog] = p
	return p, ok
}

var (
	progMu    sync.Mutex
	progCache = map[string]string{}
)

func lookPath(ctx context.Context, env *collectors.Env, prog string) (string, bool) {
	for _, dir := range strings.Split(os.Getenv("PATH"), ":") {
		if dir == "" || !path.IsAbs(dir) {
			continue
		}
		p := path.Join(dir, prog)
		var st isolate.StatResult
		if env.Do(ctx, isolate.OpStat, p, isolate.StatRequest{Path: p, Follow: true}, &st) == nil &&
			st.Mode&syscall.S_IFMT == syscall.S_IFREG && st.Mode&0o111 != 0 {
			return p, true
		}
	}
	return "", false
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// runPath maps /var/run/... to /run/...: /var/run is a symlink to
// /run on every distribution Kubernetes runs on, and following it under
// --root would leave the host's tree.
func runPath(p string) string {
	if rest, ok := strings.CutPrefix(p, "/var/run/"); ok {
		return "/run/" + rest
	}
	return p
}

// readHostFile reads a host file through an isolated worker.
func readHostFile(ctx context.Context, env *collectors.Env, hostPath string, max int64) ([]byte, error) {
	r, err := env.Host().Read(ctx, hostfs.Path(hostPath), max)
	return r.Data, err
}

// socketExists stats a host path (in a worker) and reports whether it is a
// unix socket.
func socketExists(ctx context.Context, env *collectors.Env, hostPath string) bool {
	if hostPath == "" {
		return false
	}
	st, err := env.Host().Stat(ctx, hostfs.Path(hostPath))
	return err == nil && st.Mode&syscall.S_IFMT == syscall.S_IFSOCK
}

// socketGet makes one HTTP GET over a unix socket, under its own deadline,
// and streams the answer (redacted) into the bundle.
func socketGet(ctx context.Context, env *collectors.Env, timeout time.Duration, hostSock, sock, reqPath, out, what string) layout.RuntimeItem {
	return socketFetch(ctx, env, timeout, hostSock, sock, reqPath, what, func(body io.Reader) (string, int64, error) {
		f, err := env.Create(out)
		if err != nil {
			return "", 0, err
		}
		n, cerr := io.Copy(f, io.LimitReader(body, answerLimit(env)+1))
		if err := f.Close(); cerr == nil {
			cerr = err
		}
		return out, n, cerr
	})
}

// socketGetJSON is socketGet for a JSON answer (dockerd's API answers on
// one line): it is read whole (bounded), indented so that the redactor
// sees one value per line, sanitized of registry credentials, then written.
func socketGetJSON(ctx context.Context, env *collectors.Env, timeout time.Duration, hostSock, sock, reqPath, out, what string) layout.RuntimeItem {
	return socketFetch(ctx, env, timeout, hostSock, sock, reqPath, what, func(body io.Reader) (string, int64, error) {
		limit := answerLimit(env)
		data, err := io.ReadAll(io.LimitReader(body, limit+1))
		if err != nil {
			return "", int64(len(data)), err
		}
		if int64(len(data)) > limit {
			return "", int64(len(data)), fmt.Errorf("the answer is larger than %d bytes; not kept", limit)
		}
		clean, err := RuntimeJSON(data)
		if err != nil {
			return "", int64(len(data)), err
		}
		return out, int64(len(data)), env.WriteFile(out, clean)
	})
}

func answerLimit(env *collectors.Env) int64 {
	if env.MaxFileBytes <= 0 || env.MaxFileBytes > 64<<20 {
		return 64 << 20
	}
	return env.MaxFileBytes
}

// RuntimeJSON indents a runtime's JSON answer and removes registry
// credentials from it. An answer that is not JSON is an error.
func RuntimeJSON(data []byte) ([]byte, error) {
	var buf bytes.Buffer
	if err := json.Indent(&buf, bytes.TrimSpace(data), "", "  "); err != nil {
		return nil, fmt.Errorf("the answer is not JSON: %w", err)
	}
	buf.WriteByte('\n')
	clean, _ := SanitizeRuntimeConfig(buf.Bytes())
	return clean, nil
}

// socketFetch makes one HTTP GET over a unix socket under its own
// deadline; keep stores a 200 answer's body and returns the file written.
func socketFetch(ctx context.Context, env *collectors.Env, timeout time.Duration, hostSock, sock, reqPath, what string, keep func(io.Reader) (string, int64, error)) (it layout.RuntimeItem) {
	it = layout.RuntimeItem{What: what, URL: "unix://" + hostSock + reqPath}
	start := time.Now()
	defer func() { it.DurationSeconds = time.Since(start).Seconds() }()
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	d := &net.Dialer{Timeout: timeout}
	client := &http.Client{Transport: &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "unix", sock)
		},
		ResponseHeaderTimeout: timeout,
		DisableKeepAlives:     true,
		DisableCompression:    true,
	}}
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, "http://localhost"+reqPath, nil)
	if err != nil {
		it.Error = err.Error()
		return it
	}
	resp, err := client.Do(req)
	if err != nil {
		it.Error = describeSocketError(err, timeout)
		it.TimedOut = rctx.Err() != nil
		return it
	}
	defer resp.Body.Close()
	it.StatusCode = resp.StatusCode
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		it.Error = fmt.Sprintf("answered %s: %s", resp.Status, strings.Join(strings.Fields(string(b)), " "))
		return it
	}
	file, n, err := keep(resp.Body)
	it.File, it.Bytes = file, n
	if err != nil {
		it.Error = "reading the answer: " + describeSocketError(err, timeout)
		it.TimedOut = rctx.Err() != nil
	}
	return it
}

func describeSocketError(err error, timeout time.Duration) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused: the socket exists but nothing accepts on it (the daemon is down)"
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		return fmt.Sprintf("no answer within %s: the daemon accepted the connection but did not respond", timeout)
	default:
		return err.Error()
	}
}

// runtimeCommand runs a client under its own deadline into the bundle. A
// client that is not installed is skipped, not an error: the runtime's
// socket answered the rest.
func runtimeCommand(ctx context.Context, env *collectors.Env, timeout time.Duration, out, what, prog string, args ...string) layout.RuntimeItem {
	it := layout.RuntimeItem{What: what, Command: append([]string{prog}, args...)}
	if _, ok := findProgram(ctx, env, prog); !ok {
		it.Skipped = prog + " is not installed"
		return it
	}
	res, err := env.Command(ctx, timeout, out, prog, args...)
	it.DurationSeconds = res.Duration.Seconds()
	it.TimedOut = res.TimedOut
	if errors.Is(err, collectors.ErrUnsupported) {
		it.Skipped = prog + " is not installed"
		return it
	}
	ec := res.ExitCode
	it.ExitCode = &ec
	// The file exists whatever happened; what the client printed before
	// failing or being killed is kept.
	it.File = out
	if err != nil {
		it.Error = err.Error()
	}
	return it
}

// runtimeCommandSanitized is runtimeCommand for output that may hold
// credentials the line redactor cannot recognise (a registry "auth" value
// is base64 of user:password): the output is held in memory (bounded),
// sanitized, then written.
func runtimeCommandSanitized(ctx context.Context, env *collectors.Env, timeout time.Duration, out, what, prog string, args ...string) layout.RuntimeItem {
	it := layout.RuntimeItem{What: what, Command: append([]string{prog}, args...)}
	if _, ok := findProgram(ctx, env, prog); !ok {
		it.Skipped = prog + " is not installed"
		return it
	}
	limit := int(env.MaxFileBytes)
	if limit <= 0 || limit > 64<<20 {
		limit = 64 << 20
	}
	stdout := &isolate.HeadBuffer{Max: limit}
	stderr := &isolate.HeadBuffer{Max: 64 << 10}
	// The kubelet token has no business in a runtime client.
	res, err := isolate.Run(ctx, timeout, isolate.Spec{Path: prog, Args: args, Stdout: stdout, Stderr: stderr,
		Env: append(collectors.CommandEnv(), "LC_ALL=C", "NO_COLOR=1")})
	it.DurationSeconds = res.Duration.Seconds()
	it.TimedOut = res.TimedOut
	if errors.Is(err, isolate.ErrNotFound) {
		it.Skipped = prog + " is not installed"
		return it
	}
	ec := res.ExitCode
	it.ExitCode = &ec
	if err != nil {
		it.Error = err.Error()
		if res.Evidence != nil {
			it.Error += " [" + res.Evidence.String() + "]"
		}
	} else if res.ExitCode != 0 {
		it.Error = fmt.Sprintf("%s exited with status %d: %s", prog, res.ExitCode, human.FirstLine(stderr.String()))
	}
	if data := stdout.String(); data != "" {
		clean, _ := SanitizeRuntimeConfig([]byte(data))
		if werr := env.WriteFile(out, clean); werr != nil && it.Error == "" {
			it.Error = werr.Error()
		} else {
			it.File = out
			it.Bytes = int64(len(data))
		}
	}
	if s := stderr.String(); s != "" {
		_ = env.WriteFile(out+".stderr", []byte(s))
	}
	return it
}
