package bundle

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"syscall"
)

// walkDir is Walk over an extracted bundle: a directory holding
// manifest.json and the collectors' directories, or a directory holding
// exactly one such directory (what `tar xzf` of an archive with a
// top-level directory leaves). manifest.json comes first, then every other
// file in lexical order. The refusals are the archive's: anything but a
// regular file or a directory (a symbolic link, a device, a FIFO) is
// unsafe, and so are sizes beyond the limits. Files are opened through an
// os.Root without following links, so nothing outside the directory is
// ever read.
func walkDir(ctx context.Context, dir string, lim Limits, fn func(Entry) error) error {
	base, err := bundleDir(dir)
	if err != nil {
		return err
	}
	root, err := os.OpenRoot(base)
	if err != nil {
		return fmt.Errorf("opening the bundle directory: %w", err)
	}
	defer func() { _ = root.Close() }() // read-only: nothing to lose
	w := &dirWalker{root: root, lim: lim, fn: fn}
	if err := w.entry(ManifestName); err != nil {
		return unwrapUser(err)
	}
	err = fs.WalkDir(root.FS(), ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("reading the bundle directory: %w", err)
		}
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		if name == "." || name == ManifestName {
			return nil
		}
		switch t := d.Type(); {
		case t.IsDir():
			return nil
		case t&fs.ModeSymlink != 0:
			return fmt.Errorf("%w: entry %q is a symbolic link; a bundle holds only regular files", ErrUnsafe, name)
		case !t.IsRegular():
			return fmt.Errorf("%w: entry %q is %s; a bundle holds only regular files", ErrUnsafe, name, t.Type().String())
		}
		return w.entry(name)
	})
	return unwrapUser(err)
}

// unwrapUser returns a callback's Stop error as is, as WalkReader does.
func unwrapUser(err error) error {
	var ue *userError
	if errors.As(err, &ue) {
		return ue.err
	}
	return err
}

// bundleDir finds the directory that holds manifest.json: dir itself or
// its only subdirectory.
func bundleDir(dir string) (string, error) {
	if _, err := os.Lstat(filepath.Join(dir, ManifestName)); err == nil {
		return dir, nil
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("opening the bundle directory: %w", err)
	}
	if len(ents) == 1 && ents[0].IsDir() {
		sub := filepath.Join(dir, ents[0].Name())
		if fi, err := os.Lstat(filepath.Join(sub, ManifestName)); err == nil && fi.Mode().IsRegular() {
			return sub, nil
		}
	}
	return "", fmt.Errorf("%w: %s is a directory without %s: not an extracted bundle (nor a directory holding one)", ErrUnsafe, dir, ManifestName)
}

type dirWalker struct {
	root  *os.Root
	lim   Limits
	fn    func(Entry) error
	count int
	total int64
}

// entry opens one file of the bundle directory and gives it to fn.
func (w *dirWalker) entry(name string) error {
	if _, err := safeName(name); err != nil || path.Clean(name) != name {
		return fmt.Errorf("%w: entry name %q is malformed", ErrUnsafe, name)
	}
	w.count++
	if w.lim.MaxEntries > 0 && w.count > w.lim.MaxEntries {
		return fmt.Errorf("%w: more than %d entries", ErrUnsafe, w.lim.MaxEntries)
	}
	if fi, err := w.root.Lstat(name); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("%w: entry %q is a symbolic link; a bundle holds only regular files", ErrUnsafe, name)
	}
	// O_NONBLOCK: a FIFO swapped in after the directory was listed must
	// not block the open; O_NOFOLLOW: nor may a link swapped in.
	f, err := w.root.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return fmt.Errorf("%w: entry %q is a symbolic link; a bundle holds only regular files", ErrUnsafe, name)
		}
		return fmt.Errorf("opening %s in the bundle directory: %w", name, err)
	}
	defer func() { _ = f.Close() }() // read-only
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("opening %s in the bundle directory: %w", name, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w: entry %q is %s; a bundle holds only regular files", ErrUnsafe, name, fi.Mode().Type().String())
	}
	size := fi.Size()
	if w.lim.MaxEntryBytes > 0 && size > w.lim.MaxEntryBytes {
		return fmt.Errorf("%w: entry %q is %d bytes, over the limit of %d", ErrUnsafe, name, size, w.lim.MaxEntryBytes)
	}
	if name == ManifestName && size > MaxManifestBytes {
		return fmt.Errorf("%w: manifest.json is %d bytes, over the limit of %d", ErrUnsafe, size, MaxManifestBytes)
	}
	if w.lim.MaxTotalBytes > 0 && w.total+size > w.lim.MaxTotalBytes {
		return fmt.Errorf("%w: the bundle holds more than %d bytes", ErrUnsafe, w.lim.MaxTotalBytes)
	}
	w.total += size
	cr := &countReader{r: io.LimitReader(f, size)}
	if err := w.fn(Entry{Name: name, Size: size, Reader: cr}); err != nil {
		return err
	}
	if _, err := io.Copy(io.Discard, cr); err != nil {
		return fmt.Errorf("reading %s in the bundle directory: %w", name, err)
	}
	if cr.n != size {
		return fmt.Errorf("%s in the bundle directory changed while it was read (%d of %d bytes)", name, cr.n, size)
	}
	return nil
}
