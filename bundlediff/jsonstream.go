package bundlediff

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Streaming over the two files that grow with the node (mount tables of
// every namespace, every task): one record decoded at a time, so memory
// follows what is kept, not the file's size.

// maxDepth bounds nesting while skipping a value.
const maxDepth = 10_000

func walkArray(dec *json.Decoder, fn func() error) error {
	if err := expectDelim(dec, '['); err != nil {
		return err
	}
	for dec.More() {
		if err := fn(); err != nil {
			return err
		}
	}
	return expectDelim(dec, ']')
}

func walkObject(dec *json.Decoder, fn func(key string) error) error {
	if err := expectDelim(dec, '{'); err != nil {
		return err
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		key, ok := t.(string)
		if !ok {
			return fmt.Errorf("expected an object key, found %v", t)
		}
		if err := fn(key); err != nil {
			return err
		}
	}
	return expectDelim(dec, '}')
}

func expectDelim(dec *json.Decoder, want json.Delim) error {
	t, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := t.(json.Delim); !ok || d != want {
		return fmt.Errorf("expected %q, found %v", want, t)
	}
	return nil
}

// skipValue reads past one value token by token, keeping nothing.
func skipValue(dec *json.Decoder) error {
	depth := 0
	for {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		if d, ok := t.(json.Delim); ok {
			switch d {
			case '[', '{':
				depth++
				if depth > maxDepth {
					return errors.New("JSON nested too deeply")
				}
			default:
				depth--
			}
		}
		if depth == 0 {
			return nil
		}
	}
}

// endOfInput fails when anything but white space follows the value.
func endOfInput(dec *json.Decoder) error {
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("unexpected data after the JSON value")
	}
	return nil
}
