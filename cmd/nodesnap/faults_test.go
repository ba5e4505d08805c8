package main

// Fault-injection collectors for the end-to-end tests. They exist only in
// this package's test binary, which the tests run as nodesnap itself (see
// TestMain), never in a release build.

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/collectors"
)

func init() {
	collectors.Register(collectors.Spec{Name: "test-hang-stat", Hidden: true, DefaultTimeout: 3 * time.Second,
		Description: "stat()s $NODESNAP_TEST_STAT_PATH in-process (the mistake the kubelet made in incident 003)",
		Run: func(ctx context.Context, env *collectors.Env) error {
			if err := env.WriteFile("before.txt", []byte("written before the stat\n")); err != nil {
				return err
			}
			var st unix.Stat_t
			err := unix.Stat(os.Getenv("NODESNAP_TEST_STAT_PATH"), &st)
			return env.WriteFile("after.txt", []byte(fmt.Sprintf("stat returned %v\n", err)))
		}})
	collectors.Register(collectors.Spec{Name: "test-panic", Hidden: true, DefaultTimeout: 5 * time.Second,
		Description: "panics after writing one file",
		Run: func(ctx context.Context, env *collectors.Env) error {
			_ = env.WriteFile("note.txt", []byte("about to panic\n"))
			var m map[string]int
			m["boom"]++ // nil map write: a real runtime panic
			return nil
		}})
	collectors.Register(collectors.Spec{Name: "test-exit", Hidden: true, DefaultTimeout: 5 * time.Second,
		Description: "exits with status 7 without reporting",
		Run: func(ctx context.Context, env *collectors.Env) error {
			_ = env.WriteFile("note.txt", []byte("about to exit\n"))
			os.Exit(7)
			return nil
		}})
	collectors.Register(collectors.Spec{Name: "test-bigfile", Hidden: true, DefaultTimeout: 10 * time.Second,
		Description: "writes $NODESNAP_TEST_BIG_BYTES bytes (default 3 MiB) of text to one file",
		Run: func(ctx context.Context, env *collectors.Env) error {
			n := 3 << 20
			if v := os.Getenv("NODESNAP_TEST_BIG_BYTES"); v != "" {
				fmt.Sscan(v, &n)
			}
			f, err := env.Create("big.txt")
			if err != nil {
				return err
			}
			line := strings.Repeat("x", 99) + "\n"
			for w := 0; w < n; w += len(line) {
				if _, err := f.WriteString(line); err != nil {
					f.Close()
					return err
				}
			}
			return f.Close()
		}})
	collectors.Register(collectors.Spec{Name: "test-slow", Hidden: true, DefaultTimeout: 60 * time.Second,
		Description: "writes a line every 10ms for $NODESNAP_TEST_SLOW (default 2s)",
		Run: func(ctx context.Context, env *collectors.Env) error {
			d := 2 * time.Second
			if v := os.Getenv("NODESNAP_TEST_SLOW"); v != "" {
				if p, err := time.ParseDuration(v); err == nil {
					d = p
				}
			}
			f, err := env.Create("slow.txt")
			if err != nil {
				return err
			}
			end := time.Now().Add(d)
			for i := 0; time.Now().Before(end); i++ {
				fmt.Fprintf(f, "line %d Authorization: Bearer sekrit-token-%d\n", i, i)
				time.Sleep(10 * time.Millisecond)
			}
			return f.Close()
		}})
	collectors.Register(collectors.Spec{Name: "test-sleep", Hidden: true, DefaultTimeout: time.Second,
		Description: "sleeps past its 1s deadline without looking at it (a collector stuck in a call)",
		Run: func(ctx context.Context, env *collectors.Env) error {
			_ = env.WriteFile("note.txt", []byte("going to sleep\n"))
			time.Sleep(time.Hour)
			return nil
		}})
}
