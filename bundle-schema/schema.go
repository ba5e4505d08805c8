// Package bundleschema embeds the JSON Schema (draft 2020-12) of a nodesnap
// bundle's manifest.json and validates manifests against it.
package bundleschema

import (
	"bytes"
	_ "embed"
	"fmt"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// ManifestSchema is the schema's source.
//
//go:embed manifest.schema.json
var ManifestSchema []byte

const schemaURL = "https://nodesnap.dev/schema/manifest-v1.json"

var (
	once     sync.Once
	compiled *jsonschema.Schema
	compErr  error
)

func schema() (*jsonschema.Schema, error) {
	once.Do(func() {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(ManifestSchema))
		if err != nil {
			compErr = fmt.Errorf("reading the embedded manifest schema: %w", err)
			return
		}
		c := jsonschema.NewCompiler()
		c.AssertFormat()
		if err := c.AddResource(schemaURL, doc); err != nil {
			compErr = fmt.Errorf("loading the embedded manifest schema: %w", err)
			return
		}
		compiled, compErr = c.Compile(schemaURL)
	})
	return compiled, compErr
}

// ValidateManifest checks manifest bytes against the schema. The error
// lists every violation with its JSON location.
func ValidateManifest(raw []byte) error {
	s, err := schema()
	if err != nil {
		return err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("manifest.json is not valid JSON: %w", err)
	}
	if err := s.Validate(doc); err != nil {
		return fmt.Errorf("manifest.json does not match the schema: %w", err)
	}
	return nil
}
