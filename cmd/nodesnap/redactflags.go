package main

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/nodesnap/nodesnap/redact"
	"github.com/nodesnap/nodesnap/supervisor"
)

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
	if f.config == "" && len(f.obfuscate) == 0 {
		return nil, nil
	}
	s := &redact.Settings{}
	if f.config != "" {
		cfg, err := redact.LoadConfig(f.config)
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
