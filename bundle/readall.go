package bundle

import (
	"context"
	"fmt"
	"io"
)

// Contents is a whole bundle in memory: for tests and for small bundles.
type Contents struct {
	Manifest *Manifest
	Files    map[string][]byte
}

// ReadAll reads every entry of a bundle into memory, after the same safety
// checks as Walk. maxBytes bounds the total (0: DefaultLimits).
func ReadAll(ctx context.Context, p string, maxBytes int64) (*Contents, error) {
	lim := DefaultLimits
	if maxBytes > 0 {
		lim.MaxTotalBytes = maxBytes
	}
	c := &Contents{Files: map[string][]byte{}}
	err := Walk(ctx, p, lim, func(e Entry) error {
		b, err := io.ReadAll(e.Reader)
		if err != nil {
			return err
		}
		if e.Name == ManifestName {
			m, err := ParseManifest(b)
			if err != nil {
				return err
			}
			c.Manifest = m
			return nil
		}
		c.Files[e.Name] = b
		return nil
	})
	if err != nil {
		return nil, err
	}
	if c.Manifest == nil {
		return nil, fmt.Errorf("%w: no manifest.json", ErrUnsafe)
	}
	return c, nil
}

// Collector returns a collector's result from the manifest, or nil.
func (m *Manifest) Collector(name string) *CollectorResult {
	for i := range m.Collectors {
		if m.Collectors[i].Name == name {
			return &m.Collectors[i]
		}
	}
	return nil
}
