package supervisor

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
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

// WriteMappings writes the mapping beside the bundle, mode 0600, atomically.
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
	path := strings.TrimSuffix(strings.TrimSuffix(bundlePath, ".tar.gz"), ".tar.zst") + MappingSuffix
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	return path, nil
}
