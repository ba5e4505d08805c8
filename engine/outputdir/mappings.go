package outputdir

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/bundle"
)

// MappingSuffix names the obfuscation mapping file written beside a
// bundle: <bundle>.obfuscation.json.
const MappingSuffix = ".obfuscation.json"

// Mapping is the file that turns obfuscation tokens back into values. It
// stays with whoever ran nodesnap; it never goes into the bundle.
type Mapping struct {
	Bundle string         `json:"bundle"`
	Tokens []MappingEntry `json:"tokens"`
}

// MappingEntry is one token and the value it replaced.
type MappingEntry struct {
	Token string `json:"token"`
	Value string `json:"value"`
}

// WriteMappings writes the mapping beside the bundle, mode 0600, owned by
// the user running nodesnap, and returns its path.
//
// The output directory may be world-writable (/var/tmp, the default), and
// the mapping's name is predictable from the bundle's, so nothing another
// user put there may be followed or reused: the content goes to a new file
// with an unpredictable name, created exclusively without following links
// (O_CREAT|O_EXCL|O_NOFOLLOW), checked with fstat to be a regular file of
// ours with one link, synced, and then given its name with link(2), which
// never follows or replaces what is at the new name. If the name is taken
// (a planted file or link), <bundle>-2.obfuscation.json and so on are tried.
// Nothing here depends on the kernel's protected_symlinks or
// protected_regular settings.
func WriteMappings(bundlePath string, m map[string]string) (string, error) {
	out := Mapping{Bundle: bundlePath}
	for k, v := range m {
		out.Tokens = append(out.Tokens, MappingEntry{Token: k, Value: v})
	}
	sort.Slice(out.Tokens, func(i, j int) bool { return out.Tokens[i].Token < out.Tokens[j].Token })
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return "", err
	}
	base := strings.TrimSuffix(strings.TrimSuffix(bundlePath, ".tar.gz"), ".tar.zst")
	tmp, err := writeExclusive(filepath.Dir(bundlePath), append(b, '\n'))
	if err != nil {
		return "", fmt.Errorf("writing the obfuscation mapping beside %s: %w", bundlePath, err)
	}
	defer os.Remove(tmp)
	for i := 1; i <= maxMappingNames; i++ {
		path := base + MappingSuffix
		if i > 1 {
			path = fmt.Sprintf("%s-%d%s", base, i, MappingSuffix)
		}
		err := bundle.PlaceNoReplace(tmp, path)
		if err == nil {
			return path, nil
		}
		if !errors.Is(err, unix.EEXIST) {
			return "", fmt.Errorf("writing %s: %w", path, err)
		}
	}
	return "", fmt.Errorf("writing the obfuscation mapping: %s%s and %d other names beside it are taken", base, MappingSuffix, maxMappingNames-1)
}

// maxMappingNames bounds the names tried for a mapping file.
const maxMappingNames = 100

// writeExclusive writes data to a new file in dir, with a random name that
// starts with bundle.TempPrefix and this process's pid (so a later run
// removes it if we are killed), and returns its path.
func writeExclusive(dir string, data []byte) (string, error) {
	var rnd [12]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return "", err
	}
	p := filepath.Join(dir, fmt.Sprintf("%s%d-%s.mapping.tmp", bundle.TempPrefix, os.Getpid(), hex.EncodeToString(rnd[:])))
	fd, err := unix.Open(p, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return "", &os.PathError{Op: "create", Path: p, Err: err}
	}
	f := os.NewFile(uintptr(fd), p)
	fail := func(err error) (string, error) {
		f.Close()
		os.Remove(p)
		return "", err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fail(err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || int(st.Uid) != os.Geteuid() || st.Nlink != 1 {
		return fail(fmt.Errorf("%s is not a new file of this user (uid %d, links %d)", p, st.Uid, st.Nlink))
	}
	// The umask may have taken bits away; 0600 exactly.
	if err := unix.Fchmod(fd, 0o600); err != nil {
		return fail(err)
	}
	if _, err := f.Write(data); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		os.Remove(p)
		return "", err
	}
	return p, nil
}
