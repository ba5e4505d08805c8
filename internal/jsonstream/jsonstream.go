// Package jsonstream walks big JSON documents with json.Decoder's token
// API, one element at a time: json.Decoder.Decode buffers a whole value, so
// decoding a bundle's mount table or task list at once would hold all of
// it. analyze and diff read the collectors' files through it.
package jsonstream

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// ErrMalformed wraps every structural surprise, so that a reader can
// report the file as unreadable evidence rather than abort.
var ErrMalformed = errors.New("malformed JSON")

// MaxDepth bounds nesting while a value is skipped.
const MaxDepth = 10_000

// NewDecoder is a decoder that keeps numbers as json.Number, reading r
// through Compact: bounded in time and memory whatever the document holds.
func NewDecoder(r io.Reader) *json.Decoder {
	d := json.NewDecoder(Compact(r))
	d.UseNumber()
	return d
}

// WalkObject reads one object, calling fn with each key; fn must consume
// the value (decode it or call SkipValue). A JSON null is an empty object.
func WalkObject(dec *json.Decoder, fn func(key string) error) error {
	t, err := dec.Token()
	if err != nil {
		return err
	}
	if t == nil {
		return nil
	}
	if d, ok := t.(json.Delim); !ok || d != '{' {
		return fmt.Errorf("%w: expected an object, found %v", ErrMalformed, t)
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		key, ok := t.(string)
		if !ok {
			return fmt.Errorf("%w: object key is %v", ErrMalformed, t)
		}
		if err := fn(key); err != nil {
			return err
		}
	}
	_, err = dec.Token()
	return err
}

// WalkArray reads one array, calling fn for each element; fn must consume
// it. A JSON null is an empty array.
func WalkArray(dec *json.Decoder, fn func() error) error {
	t, err := dec.Token()
	if err != nil {
		return err
	}
	if t == nil {
		return nil
	}
	if d, ok := t.(json.Delim); !ok || d != '[' {
		return fmt.Errorf("%w: expected an array, found %v", ErrMalformed, t)
	}
	for dec.More() {
		if err := fn(); err != nil {
			return err
		}
	}
	_, err = dec.Token()
	return err
}

// SkipValue consumes one value without keeping it: objects and arrays
// token by token (so a big one is never buffered whole), nested at most
// MaxDepth deep.
func SkipValue(dec *json.Decoder) error {
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
				if depth > MaxDepth {
					return fmt.Errorf("%w: nested more than %d deep", ErrMalformed, MaxDepth)
				}
			case '}', ']':
				depth--
			}
		}
		if depth == 0 {
			return nil
		}
	}
}

// EndOfInput checks that nothing but white space follows the value.
func EndOfInput(dec *json.Decoder) error {
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if err == nil {
			return fmt.Errorf("%w: data after the end of the document", ErrMalformed)
		}
		return err
	}
	return nil
}
