package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/nodesnap/nodesnap/engine/isolate"
	"github.com/nodesnap/nodesnap/engine/supervisor"
	"github.com/nodesnap/nodesnap/internal/owndesc"
	"github.com/nodesnap/nodesnap/redact"
)

// configReadTimeout bounds the read of --redact-config: a file on a hung
// network or FUSE mount must not hold the run before it has begun.
const configReadTimeout = 5 * time.Second

// maxConfigBytes is the largest --redact-config read: a rules file is a
// few kilobytes; anything near this is the wrong file.
const maxConfigBytes = 4 << 20

// redactFlags are the redaction options shared by collect and redact.
type redactFlags struct {
	config    string
	obfuscate []string
}

func (f *redactFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.config, "redact-config", "", "YAML file of extra redaction rules (literals, regexes, keys) and obfuscation lists")
	fs.StringSliceVar(&f.obfuscate, "obfuscate", nil, "replace these with consistent tokens: ip, hostname, mac, user (the token→value mapping is written beside the bundle, never inside)")
}

// settings loads and checks the redaction configuration before any
// collection starts, so a mistake in it is reported with its line number
// and nothing is collected. nil means the built-in rules alone.
func (f *redactFlags) settings() (*redact.Settings, error) {
	return f.settingsFrom(redact.LoadConfig)
}

// isolatedSettings is settings for collect: the config file is read in a
// worker process under configReadTimeout, since collect's own process
// never opens a path that could hang (redact, an offline command on a
// file the user chose, reads it directly).
func (f *redactFlags) isolatedSettings() (*redact.Settings, error) {
	return f.settingsFrom(func(p string) (*redact.Config, error) {
		data, err := readConfig(p)
		if err != nil {
			return nil, err
		}
		cfg, err := redact.ParseConfig(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		return cfg, nil
	})
}

// readConfig reads --redact-config under configReadTimeout: a host path
// in a worker; one of this process's descriptors (<(...), a pipe), which
// a worker does not have, here, with the same deadline.
func readConfig(p string) ([]byte, error) {
	fd, own := owndesc.Parse(p)
	if !own {
		return readConfigIsolated(p, configReadTimeout)
	}
	file, err := owndesc.FilePath(fd)
	if err != nil {
		return nil, fmt.Errorf("reading the redaction config %s: %w (sudo closes descriptors other than 0-2: use --redact-config /dev/stdin)", p, err)
	}
	if file != "" {
		return readConfigIsolated(file, configReadTimeout)
	}
	data, err := owndesc.Read(context.Background(), fd, configReadTimeout, maxConfigBytes+1)
	if err != nil {
		return nil, fmt.Errorf("reading the redaction config %s: %w", p, err)
	}
	if len(data) > maxConfigBytes {
		return nil, fmt.Errorf("reading the redaction config %s: larger than %d MiB, which no rules file is: is it the right file?", p, maxConfigBytes>>20)
	}
	return data, nil
}

// readConfigIsolated reads a small file in a worker under a deadline.
func readConfigIsolated(p string, timeout time.Duration) ([]byte, error) {
	pool := isolate.NewPool(1, timeout)
	defer pool.Close()
	var r isolate.ReadFileResult
	err := pool.Do(context.Background(), isolate.OpReadFile, isolate.ReadFileRequest{Path: p, Max: maxConfigBytes}, &r)
	switch {
	case isolate.IsTimeout(err):
		return nil, fmt.Errorf("reading the redaction config %s: no answer within %s (is it on a hung network or FUSE mount?); nothing was collected", p, timeout)
	case err != nil:
		var oe *isolate.OpError
		if errors.As(err, &oe) && oe.Errno != 0 {
			return nil, fmt.Errorf("reading the redaction config: %w", &os.PathError{Op: "open", Path: p, Err: oe.Errno})
		}
		return nil, fmt.Errorf("reading the redaction config %s: %w", p, err)
	case r.Truncated:
		return nil, fmt.Errorf("reading the redaction config %s: larger than %d MiB, which no rules file is: is it the right file?", p, maxConfigBytes>>20)
	}
	return r.Data, nil
}

func (f *redactFlags) settingsFrom(load func(string) (*redact.Config, error)) (*redact.Settings, error) {
	if f.config == "" && len(f.obfuscate) == 0 {
		return nil, nil
	}
	s := &redact.Settings{}
	if f.config != "" {
		cfg, err := load(f.config)
		if err != nil {
			return nil, &supervisor.UsageError{Msg: err.Error()}
		}
		s.Config = cfg
	}
	for _, c := range f.obfuscate {
		c = strings.ToLower(strings.TrimSpace(c))
		switch c {
		case "ip", "hostname", "mac", "user":
			s.Options.Obfuscate = append(s.Options.Obfuscate, c)
		case "":
		default:
			return nil, &supervisor.UsageError{Msg: fmt.Sprintf("--obfuscate: unknown class %q (want ip, hostname, mac or user)", c)}
		}
	}
	if _, err := redact.Build(s.Config, redact.Options{Obfuscate: s.Options.Obfuscate, Key: make([]byte, 32)}); err != nil {
		return nil, &supervisor.UsageError{Msg: err.Error()}
	}
	return s, nil
}

// withOwnSecrets adds nodesnap's own credentials to the settings, which
// are created if there were none: every collector's redactor masks them
// wherever they appear.
func withOwnSecrets(s *redact.Settings, own []string) *redact.Settings {
	if len(own) == 0 {
		return s
	}
	if s == nil {
		s = &redact.Settings{}
	}
	s.Options.Own = append(s.Options.Own, own...)
	return s
}
