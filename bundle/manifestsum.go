package bundle

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// A manifest proves its own bytes. Every file of a bundle has its size and
// sha256 in manifest.json, and the compressed stream's trailer (gzip's
// CRC-32 and length, zstd's checksum) covers the tar headers; what was left
// unproven was manifest.json itself: a changed digit in a file's size, a
// status or a hostname read as true. From schema version 2 the manifest
// carries manifest_sha256, the sha256 of manifest.json's bytes with that
// value's 64 digits written as zeros, and every reader checks it when it
// decodes the manifest (ParseManifest). The field is found as the last
// "manifest_sha256" key of the text: the writer puts it last, and a JSON
// decoder keeps the last of duplicate keys, so the value checked is the
// value decoded.

// manifestSumKey is the checksum's key as it appears in the JSON text.
const manifestSumKey = `"manifest_sha256"`

// sumPlaceholder is the value SealManifest expects before it fills it.
var sumPlaceholder = bytes.Repeat([]byte("0"), sha256.Size*2)

// locateManifestSum returns the offset of the 64 hex digits of the last
// manifest_sha256 value in raw, or -1.
func locateManifestSum(raw []byte) int {
	i := bytes.LastIndex(raw, []byte(manifestSumKey))
	if i < 0 {
		return -1
	}
	j := i + len(manifestSumKey)
	for j < len(raw) && isJSONSpace(raw[j]) {
		j++
	}
	if j >= len(raw) || raw[j] != ':' {
		return -1
	}
	j++
	for j < len(raw) && isJSONSpace(raw[j]) {
		j++
	}
	if j+2+len(sumPlaceholder) > len(raw) || raw[j] != '"' || raw[j+1+len(sumPlaceholder)] != '"' {
		return -1
	}
	for _, c := range raw[j+1 : j+1+len(sumPlaceholder)] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return -1
		}
	}
	return j + 1
}

func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// manifestSum is the checksum of raw with the digits at off zeroed.
func manifestSum(raw []byte, off int) string {
	h := sha256.New()
	h.Write(raw[:off])
	h.Write(sumPlaceholder)
	h.Write(raw[off+len(sumPlaceholder):])
	return hex.EncodeToString(h.Sum(nil))
}

// SealManifest writes, in place, the checksum into manifest JSON that
// holds a manifest_sha256 field (any 64 hex digits: the writer puts
// zeros there).
func SealManifest(raw []byte) error {
	off := locateManifestSum(raw)
	if off < 0 {
		return fmt.Errorf("sealing the manifest: it has no manifest_sha256 field to fill")
	}
	copy(raw[off:], manifestSum(raw, off))
	return nil
}

// MarshalManifest is the manifest.json a bundle holds: m indented, its
// schema version this code's, sealed.
func MarshalManifest(m *Manifest) ([]byte, error) {
	c := *m
	c.SchemaVersion = SchemaVersion
	c.ManifestSHA256 = string(sumPlaceholder)
	mj, err := json.MarshalIndent(&c, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding the manifest: %w", err)
	}
	mj = append(mj, '\n')
	if err := SealManifest(mj); err != nil {
		return nil, err
	}
	return mj, nil
}

// VerifyManifest checks manifest bytes against their own checksum. A
// manifest of schema version 1 has none (it is read as before and the
// gzip or zstd checksum is all that covers it); from version 2 a manifest
// without one is refused, since a changed byte in its key would otherwise
// remove the check.
func VerifyManifest(raw []byte, version int) error {
	off := locateManifestSum(raw)
	if off < 0 {
		if version < 2 {
			return nil
		}
		if bytes.Contains(raw, []byte(manifestSumKey)) {
			return fmt.Errorf("%w: manifest.json's manifest_sha256 is not 64 lower-case hex digits: the manifest is damaged", ErrUnsafe)
		}
		return fmt.Errorf("%w: manifest.json (schema version %d) carries no checksum of its own (manifest_sha256): the manifest is damaged or was edited", ErrUnsafe, version)
	}
	var probe struct {
		Sum string `json:"manifest_sha256"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return fmt.Errorf("%w: manifest.json is not valid JSON: %w", ErrUnsafe, err)
	}
	recorded := string(raw[off : off+len(sumPlaceholder)])
	if probe.Sum != recorded {
		return fmt.Errorf("%w: manifest.json's manifest_sha256 is not where its writer puts it: the manifest is damaged or was edited", ErrUnsafe)
	}
	if got := manifestSum(raw, off); got != recorded {
		return fmt.Errorf("%w: manifest.json does not match its own checksum (manifest_sha256 says %s, its bytes hash to %s): the manifest is damaged or was edited", ErrUnsafe, recorded, got)
	}
	return nil
}
