package outputdir

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/nodesnap/nodesnap/bundle"
)

// SumSuffix names a bundle's checksum file, written beside it:
// <bundle>.sha256, one line in the format of sha256sum, so that
// `sha256sum -c <bundle>.sha256` checks a copy where it lands.
const SumSuffix = bundle.SumSuffix

// SumLine is the sidecar's content for a bundle named base.
func SumLine(sha256, base string) string {
	return sha256 + "  " + base + "\n"
}

// WriteSum writes w's sidecar atomically: a temporary file (mode 0644,
// the checksum is no secret), synced, then renamed to <bundle>.sha256 only
// if nothing is there (a file or link planted in a shared directory is
// never followed or replaced). A reader finds the whole line or no file.
func WriteSum(w bundle.Written) (string, error) {
	base := filepath.Base(w.Path)
	if strings.ContainsAny(base, "\n\\") {
		return "", fmt.Errorf("the bundle's name %q cannot go into a checksum file", base)
	}
	tmp, err := writeExclusive(filepath.Dir(w.Path), []byte(SumLine(w.SHA256, base)))
	if err != nil {
		return "", fmt.Errorf("writing the checksum file beside %s: %w", w.Path, err)
	}
	defer os.Remove(tmp)
	if err := os.Chmod(tmp, 0o644); err != nil {
		return "", fmt.Errorf("writing the checksum file beside %s: %w", w.Path, err)
	}
	p := w.Path + SumSuffix
	if err := bundle.PlaceNoReplace(tmp, p); err != nil {
		return "", fmt.Errorf("writing %s: %w", p, err)
	}
	return p, nil
}
