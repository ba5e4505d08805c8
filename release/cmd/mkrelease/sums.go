package main

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// sums is the SHA256SUMS text of the regular files in dir (hidden files
// and SHA256SUMS itself excluded), one "HASH  NAME" line each, sorted by
// name: what `sha256sum -c SHA256SUMS` checks.
func sums(dir string) (string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("listing %s: %w", dir, err)
	}
	var names []string
	for _, e := range ents {
		if e.Type().IsRegular() && !strings.HasPrefix(e.Name(), ".") && e.Name() != "SHA256SUMS" {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	var b strings.Builder
	for _, n := range names {
		f, err := os.Open(filepath.Join(dir, n))
		if err != nil {
			return "", fmt.Errorf("hashing %s: %w", n, err)
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return "", fmt.Errorf("hashing %s: %w", n, err)
		}
		fmt.Fprintf(&b, "%s  %s\n", hex.EncodeToString(h.Sum(nil)), n)
	}
	return b.String(), nil
}

func cmdSums(args []string, stdout, stderr io.Writer) error {
	fl := flag.NewFlagSet("sums", flag.ContinueOnError)
	fl.SetOutput(stderr)
	if err := fl.Parse(args); err != nil {
		return err
	}
	if fl.NArg() != 1 {
		return usageError{"need one directory"}
	}
	dir := fl.Arg(0)
	s, err := sums(dir)
	if err != nil {
		return err
	}
	if s == "" {
		return fmt.Errorf("%s holds no file to sum", dir)
	}
	out := filepath.Join(dir, "SHA256SUMS")
	if err := os.WriteFile(out, []byte(s), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", out, err)
	}
	fmt.Fprintln(stdout, out)
	return nil
}
