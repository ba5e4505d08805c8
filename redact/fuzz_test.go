package redact

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// fuzzPlants are secrets set on lines of their own between two pieces of
// random input. Whatever the random input does to the Writer's state (an
// unterminated PEM block, a YAML block scalar, a Secret data map, a line
// cut into pieces), none may come out.
var fuzzPlants = []struct{ line, secret string }{
	{"Authorization: Bearer PLANTEDSECRETTOKEN12345", "PLANTEDSECRETTOKEN12345"},
	{"password=PLANTEDSECRETPW12345", "PLANTEDSECRETPW12345"},
	{"x eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.PLANTEDJWTSIG12345abcdef y", "PLANTEDJWTSIG12345abcdef"},
	{"-----BEGIN RSA PRIVATE KEY-----\nPLANTEDPEMBODYLINE1234567890abcdefghijklmnopqrstuvwxyzABCDEFGHIJ\n-----END RSA PRIVATE KEY-----", "PLANTEDPEMBODYLINE1234567890"},
	{"aws_access_key_id AKIAPLANTEDKEY123456", "AKIAPLANTEDKEY123456"},
	{"\tkey = AQPLANTEDCEPHKEY0123456789abcdefghijkl==", "AQPLANTEDCEPHKEY0123456789abcdefghijkl"},
	{"--token PLANTEDFLAGTOKEN12345", "PLANTEDFLAGTOKEN12345"},
	{"pull failed: token ghp_Pl4ntedV3ndorT0kQ7wZx2Rk9Lm5Nb8Vc3Hd6J lacks scope", "Pl4ntedV3ndorT0kQ7wZx2Rk9Lm5"},
	{"2026-11-23T09:23:03.000003000Z stderr F   password: PLANTEDPREFIXEDPW12345", "PLANTEDPREFIXEDPW12345"},
	{"curl -u admin:PLANTEDCURLPW12345 https://x", "PLANTEDCURLPW12345"},
}

func fuzzRedactors() []*Redactor {
	obf, err := Build(nil, Options{Obfuscate: []string{"ip", "hostname", "mac", "user"}, Key: testKey, Hostnames: []string{"node-a"}, Users: []string{"alice"}})
	if err != nil {
		panic(err)
	}
	return []*Redactor{Default(), obf}
}

func FuzzWriter(f *testing.F) {
	for _, tc := range ruleCases() {
		f.Add([]byte(tc.in), uint16(7), uint8(0))
	}
	_ = filepath.WalkDir("testdata", func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && filepath.Ext(path) != ".go" {
			if b, err := os.ReadFile(path); err == nil && len(b) < 64<<10 {
				f.Add(b, uint16(300), uint8(1))
			}
		}
		return nil
	})
	f.Add([]byte("-----BEGIN RSA PRIVATE KEY-----\n"), uint16(1), uint8(2))
	f.Add([]byte("data:\n  password: |\n"), uint16(3), uint8(3))
	f.Add([]byte("\x00\xff\r\n\"token\":\"\\\"x"), uint16(64), uint8(4))
	reds := fuzzRedactors()
	f.Fuzz(func(t *testing.T, data []byte, split uint16, mode uint8) {
		r := reds[int(mode)%len(reds)]
		maxLine := 128 + int(mode)*61
		var in bytes.Buffer
		in.Write(data)
		for _, p := range fuzzPlants {
			in.WriteString("\n" + p.line)
		}
		in.WriteString("\n")
		in.Write(data)
		input := in.Bytes()

		run := func(chunk int) []byte {
			var out bytes.Buffer
			w := r.NewWriter(&out)
			w.maxLine = maxLine
			for p := input; len(p) > 0; {
				n := min(chunk, len(p))
				if _, err := w.Write(p[:n]); err != nil {
					t.Fatal(err)
				}
				p = p[n:]
				if c, _ := w.memory(); c > maxLine {
					t.Fatalf("input buffer %d > maxLine %d", c, maxLine)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			return out.Bytes()
		}
		out := run(len(input))
		for _, p := range fuzzPlants {
			if !bytes.Contains(data, []byte(p.secret)) && bytes.Contains(out, []byte(p.secret)) {
				t.Fatalf("planted %q survived:\n%q", p.secret, out)
			}
		}
		if len(out) > 20*len(input)+1024 {
			t.Fatalf("output grew to %d bytes from %d", len(out), len(input))
		}
		// However the input is split into writes, the output is the same.
		if chunked := run(1 + int(split)%97); !bytes.Equal(chunked, out) {
			t.Fatalf("output depends on write sizes:\n%q\n%q", out, chunked)
		}
	})
}

func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(goodConfig))
	f.Add([]byte("rules:\n  - name: x\n    regex: '('\n"))
	f.Add([]byte("rules:\n  - name: a\n    keys: [db_pin]\n    literals: &l [abcdef]\n  - name: b\n    literals: *l\n"))
	f.Add([]byte("obfuscate:\n  hostname_patterns: ['[a-z]+\\.corp']\n  users: [bob]\ndisable: [jwt]\n"))
	f.Add([]byte("{rules: [{name: a, regex: 'x(?P<secret>y)'}]}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseConfig(data)
		if err != nil {
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("error is not a ConfigError: %v", err)
			}
			return
		}
		// What ParseConfig accepts, Build accepts: problems are reported
		// before collection starts, never half-way through it.
		r, err := Build(cfg, Options{})
		if err != nil {
			t.Fatalf("ParseConfig accepted what Build rejects: %v", err)
		}
		raw, err := json.Marshal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var back Config
		if err := json.Unmarshal(raw, &back); err != nil {
			t.Fatal(err)
		}
		if _, err := Build(&back, Options{}); err != nil {
			t.Fatalf("config does not survive JSON: %v", err)
		}
		_, _ = r.String("password=x token: y " + string(data))
	})
}

// FuzzRedactTwice: redacting output again changes and counts nothing.
// `nodesnap redact BUNDLE` re-redacts bundles; its manifest must not
// claim secrets the first pass already removed. testdata/fuzz holds the
// inputs it found that did (a marker taken for a Go map's "[", a marker
// line in a PEM block taken for its header).
func FuzzRedactTwice(f *testing.F) {
	for _, tc := range ruleCases() {
		f.Add([]byte(tc.in), uint8(0))
		f.Add([]byte(tc.in), uint8(1))
	}
	reds := fuzzRedactors()
	f.Fuzz(func(t *testing.T, data []byte, mode uint8) {
		r := reds[int(mode)%len(reds)]
		out, _ := r.String(string(data))
		again, counts := r.String(out)
		if again != out || len(counts) != 0 {
			t.Fatalf("second pass changed %q\n  first:  %q\n  second: %q %v", data, out, again, counts)
		}
	})
}

// FuzzLogPrefix: logPrefixLen reads any bytes without panicking, returns a
// length within the line, and text appended to a line never shortens the
// prefix found (a prefix depends on what comes before the text only).
func FuzzLogPrefix(f *testing.F) {
	for _, tc := range logPrefixCases {
		f.Add([]byte(tc.line))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		n := logPrefixLen(line)
		if n < 0 || n > len(line) {
			t.Fatalf("logPrefixLen(%q) = %d, outside the line", line, n)
		}
		if n > 0 && n < len(line) && line[n-1] == ' ' {
			longer := append(append([]byte(nil), line...), " password: x"...)
			if m := logPrefixLen(longer); m < n {
				t.Fatalf("prefix of %q is %d, of %q %d", line, n, longer, m)
			}
		}
	})
}
