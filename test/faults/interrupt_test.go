package faults

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/test/testkit"
)

// SIGINT or SIGTERM at random moments of a full default collection: always
// a valid bundle or none, never a staging directory left, and never an
// unredacted byte on disk — the staging directory is watched while the run
// goes on, and a planted secret (in a process's command line and in the
// node's files) must never appear in it.
func TestInterruptsAtRandomPoints(t *testing.T) {
	testkit.RequireRoot(t)
	bin := testkit.Binary(t)
	n := newNode(t)
	cmdSecret := "RelCmdlinePassw0rd" + fmt.Sprint(os.Getpid())
	holder := exec.Command("/bin/sh", "-c", "sleep 600; :", "rel-holder", "--password="+cmdSecret)
	holder.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-holder.Process.Pid, syscall.SIGKILL); holder.Wait() })
	secrets := append([]string{cmdSecret}, n.secrets...)

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	for i := 0; i < rounds(5, 20); i++ {
		sig := syscall.SIGTERM
		if i%2 == 1 {
			sig = syscall.SIGINT
		}
		delay := time.Duration(rng.Int64N(int64(2500 * time.Millisecond)))
		t.Run(fmt.Sprintf("%d-%s-after-%s", i, sigName(sig), delay.Round(time.Millisecond)), func(t *testing.T) {
			out := t.TempDir()
			cmd := exec.Command(bin, n.args(out)...)
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			var leakMu sync.Mutex
			var leaks []string
			wg.Add(1)
			go func() {
				defer wg.Done()
				watchStaging(out, secrets, stop, func(path string) {
					leakMu.Lock()
					leaks = append(leaks, path)
					leakMu.Unlock()
				})
			}()
			start := time.Now()
			time.Sleep(delay)
			_ = cmd.Process.Signal(sig)
			done := make(chan struct{})
			go func() { cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(runTimeout + slack):
				syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-done
				t.Errorf("nodesnap did not end within %s of %s", runTimeout+slack, sigName(sig))
			}
			close(stop)
			wg.Wait()
			o := outcome{fault: "SIGINT/SIGTERM at a random point"}
			if el := time.Since(start); el > runTimeout {
				o.overrun = el - runTimeout
			}
			_, co := checkOutput(t, out, true, secrets)
			o.valid, o.noBundle, o.leaked = co.valid, co.noBundle, co.leaked+len(leaks)
			for _, l := range leaks {
				t.Errorf("unredacted secret on disk in staging: %s", l)
			}
			code := cmd.ProcessState.ExitCode()
			if co.noBundle && (code == 0 || code == 3) {
				t.Errorf("exit %d but no bundle", code)
			}
			o.failed = t.Failed()
			record(o)
		})
	}
}

func sigName(s syscall.Signal) string {
	if s == syscall.SIGINT {
		return "SIGINT"
	}
	return "SIGTERM"
}

// watchStaging reads every file under the output directory's staging
// directories, over and over, until stop; found is told of any file that
// holds a secret.
func watchStaging(out string, secrets []string, stop <-chan struct{}, found func(string)) {
	reported := map[string]bool{}
	for {
		select {
		case <-stop:
			return
		default:
		}
		ents, _ := os.ReadDir(out)
		for _, e := range ents {
			if !strings.HasPrefix(e.Name(), ".nodesnap-") || !e.IsDir() {
				continue
			}
			filepath.WalkDir(filepath.Join(out, e.Name()), func(p string, d os.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return nil
				}
				b, err := os.ReadFile(p)
				if err != nil {
					return nil
				}
				for _, s := range secrets {
					if bytes.Contains(b, []byte(s)) && !reported[p] {
						reported[p] = true
						found(p)
					}
				}
				return nil
			})
		}
		time.Sleep(5 * time.Millisecond)
	}
}
