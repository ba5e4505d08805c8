package analyze

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// The collectors' big JSON files (mounts.json with tens of thousands of
// mounts, holders.json, probes.json) are walked with json.Decoder's token
// API, decoding one array element at a time: json.Decoder.Decode buffers
// a whole value, so decoding the file at once would hold all of it.

// errNotJSON wraps every structural surprise, so that the engine reports
// the file as unreadable evidence rather than aborting.
var errNotJSON = errors.New("malformed JSON")

func newDecoder(r io.Reader) *json.Decoder {
	d := json.NewDecoder(r)
	d.UseNumber()
	return d
}

// walkObject reads one object, calling fn with each key; fn must consume
// the value (decode it or call skipValue). A JSON null is an empty object.
func walkObject(dec *json.Decoder, fn func(key string) error) error {
	t, err := dec.Token()
	if err != nil {
		return err
	}
	if t == nil {
		return nil
	}
	if d, ok := t.(json.Delim); !ok || d != '{' {
		return fmt.Errorf("%w: expected an object, found %v", errNotJSON, t)
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		key, ok := t.(string)
		if !ok {
			return fmt.Errorf("%w: object key is %v", errNotJSON, t)
		}
		if err := fn(key); err != nil {
			return err
		}
	}
	_, err = dec.Token()
	return err
}

// walkArray reads one array, calling fn for each element; fn must consume
// it. A JSON null is an empty array.
func walkArray(dec *json.Decoder, fn func() error) error {
	t, err := dec.Token()
	if err != nil {
		return err
	}
	if t == nil {
		return nil
	}
	if d, ok := t.(json.Delim); !ok || d != '[' {
		return fmt.Errorf("%w: expected an array, found %v", errNotJSON, t)
	}
	for dec.More() {
		if err := fn(); err != nil {
			return err
		}
	}
	_, err = dec.Token()
	return err
}

// skipValue consumes one value without keeping it: objects and arrays
// token by token (so a big one is never buffered whole).
func skipValue(dec *json.Decoder) error {
	depth := 0
	for {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		if d, ok := t.(json.Delim); ok {
			switch d {
			case '{', '[':
				depth++
			case '}', ']':
				depth--
			}
		}
		if depth == 0 {
			return nil
		}
	}
}

// endOfInput checks that nothing but whitespace follows the value.
func endOfInput(dec *json.Decoder) error {
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if err == nil {
			return fmt.Errorf("%w: data after the end of the document", errNotJSON)
		}
		return err
	}
	return nil
}
