package bundle_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/bundle/schema"
)

// TestManifestSchemaRejects edits a valid manifest one field at a time and
// checks that the schema check, followed by the decode every reader does
// (ParseManifest), refuses each edit and accepts the original.
func TestManifestSchemaRejects(t *testing.T) {
	base, err := bundle.MarshalManifest(minimalManifest())
	if err != nil {
		t.Fatal(err)
	}
	check := func(raw []byte) error {
		if err := schema.ValidateManifest(raw); err != nil {
			return err
		}
		_, err := bundle.ParseManifest(raw)
		return err
	}
	if err := check(base); err != nil {
		t.Fatalf("a valid manifest is refused: %v", err)
	}
	cases := []struct {
		name string
		edit func(m map[string]any)
		want string // a word of the error
	}{
		{"unknown collector status", func(m map[string]any) {
			m["collectors"].([]any)[0].(map[string]any)["status"] = "bogus"
		}, "status"},
		{"unknown top-level field", func(m map[string]any) { m["surprise"] = true }, "surprise"},
		{"missing required field", func(m map[string]any) { delete(m, "collectors") }, "collectors"},
		{"negative size", func(m map[string]any) {
			m["files"] = []any{map[string]any{"path": "host/a", "collector": "host", "size": -1, "sha256": strings.Repeat("0", 64), "kind": "text"}}
		}, "size"},
		{"collector name outside its pattern", func(m map[string]any) {
			m["collectors"].([]any)[0].(map[string]any)["name"] = "../host"
		}, "name"},
		{"string where a number goes", func(m map[string]any) { m["settings"].(map[string]any)["timeout_seconds"] = "120" }, "timeout_seconds"},
		{"date-time that is not one", func(m map[string]any) { m["started_at"] = "yesterday" }, "yesterday"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var m map[string]any
			if err := json.Unmarshal(base, &m); err != nil {
				t.Fatal(err)
			}
			c.edit(m)
			raw, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			// Sealed again: the schema is what refuses, not the checksum.
			if err := bundle.SealManifest(raw); err != nil {
				t.Fatal(err)
			}
			err = check(raw)
			if err == nil {
				t.Fatalf("accepted: %s", raw)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not name %q", err, c.want)
			}
		})
	}
}
