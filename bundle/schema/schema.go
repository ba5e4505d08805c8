// Package schema embeds the JSON Schema (draft 2020-12) of a nodesnap
// bundle's manifest.json and validates manifests against it.
package schema

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
)

// ManifestSchema is the schema's source.
//
//go:embed manifest.schema.json
var ManifestSchema []byte

var (
	once     sync.Once
	compiled *jsonschema.Resolved
	compErr  error
)

// schema compiles the embedded schema on first use: a process that never
// validates a manifest (every collector and worker) pays nothing for it.
func schema() (*jsonschema.Resolved, error) {
	once.Do(func() {
		var s jsonschema.Schema
		if err := json.Unmarshal(ManifestSchema, &s); err != nil {
			compErr = fmt.Errorf("reading the embedded manifest schema: %w", err)
			return
		}
		compiled, compErr = s.Resolve(nil)
		if compErr != nil {
			compErr = fmt.Errorf("loading the embedded manifest schema: %w", compErr)
		}
	})
	return compiled, compErr
}

// ValidateManifest checks manifest bytes against the schema. The error
// names the first violation with its location in the schema. The schema's
// "format" keywords (date-time) are annotations to this validator: the
// times are checked when the manifest is decoded (ParseManifest), which
// every reader does right after.
func ValidateManifest(raw []byte) error {
	s, err := schema()
	if err != nil {
		return err
	}
	var doc any
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&doc); err != nil {
		return fmt.Errorf("manifest.json is not valid JSON: %w", err)
	}
	if dec.More() {
		return fmt.Errorf("manifest.json is not valid JSON: more than one value")
	}
	if err := s.Validate(doc); err != nil {
		return fmt.Errorf("manifest.json does not match the schema: %w", err)
	}
	return nil
}
