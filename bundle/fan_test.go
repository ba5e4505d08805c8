package bundle_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/bundle"
)

// Fan gives each consumer what Walk alone gives it: every entry whole to
// one that reads them, its own error to one that stops, nothing lost for
// the others; a cut archive ends every walk with Walk's error.
func TestFanIsWalkForEachConsumer(t *testing.T) {
	files := map[string]string{"host/a.txt": strings.Repeat("alpha\n", 50000), "host/b.txt": "beta\n", "host/c.txt": "gamma\n"}
	p, _ := writeBundle(t, files, bundle.Gzip)
	read := func(p string) (map[string]string, error) {
		got := map[string]string{}
		err := bundle.Walk(context.Background(), p, bundle.DefaultLimits, func(e bundle.Entry) error {
			b, err := io.ReadAll(e.Reader)
			got[e.Name] = string(b)
			return err
		})
		return got, err
	}
	want, err := read(p)
	if err != nil || len(want) != 4 {
		t.Fatalf("Walk: %v, %d entries", err, len(want))
	}
	stop := errors.New("enough")
	var all, half map[string]string
	var names []string
	errs := bundle.Fan(context.Background(), p, bundle.DefaultLimits,
		func(walk bundle.WalkFunc) error {
			all = map[string]string{}
			return walk(func(e bundle.Entry) error {
				b, err := io.ReadAll(e.Reader)
				all[e.Name] = string(b)
				return err
			})
		},
		func(walk bundle.WalkFunc) error {
			half = map[string]string{}
			return walk(func(e bundle.Entry) error {
				if len(half) == 2 {
					return bundle.Stop(stop)
				}
				b, _ := io.ReadAll(io.LimitReader(e.Reader, 3)) // a head only
				half[e.Name] = string(b)
				return nil
			})
		},
		func(walk bundle.WalkFunc) error {
			return walk(func(e bundle.Entry) error { names = append(names, e.Name); return nil })
		},
		func(bundle.WalkFunc) error { return nil }, // never walks
	)
	if errs[0] != nil || !reflect.DeepEqual(all, want) {
		t.Errorf("reader: %v, %d entries, equal to Walk's: %v", errs[0], len(all), reflect.DeepEqual(all, want))
	}
	if !errors.Is(errs[1], stop) || len(half) != 2 {
		t.Errorf("stopper: %v after %d entries, want %v after 2", errs[1], len(half), stop)
	}
	if errs[2] != nil || len(names) != 4 || names[0] != bundle.ManifestName {
		t.Errorf("lister: %v, %v", errs[2], names)
	}
	if errs[3] != nil {
		t.Errorf("idle consumer: %v", errs[3])
	}

	whole, _ := os.ReadFile(p)
	cut := filepath.Join(t.TempDir(), "cut.tar.gz")
	if err := os.WriteFile(cut, whole[:len(whole)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	_, walkErr := read(cut)
	var te *bundle.TruncatedError
	if !errors.As(walkErr, &te) {
		t.Fatalf("Walk of a cut archive: %v", walkErr)
	}
	consumer := func(walk bundle.WalkFunc) error {
		return walk(func(e bundle.Entry) error { _, err := io.ReadAll(e.Reader); return err })
	}
	for i, err := range bundle.Fan(context.Background(), cut, bundle.DefaultLimits, consumer, consumer) {
		if !errors.As(err, &te) || err.Error() != walkErr.Error() {
			t.Errorf("consumer %d of a cut archive: %v, want Walk's %v", i, err, walkErr)
		}
	}
}
