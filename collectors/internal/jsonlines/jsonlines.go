// Package jsonlines writes a collector's large JSON files a piece at a
// time: an object whose long arrays hold one element per line, so that a
// reader can stream them and a diff shows one record per line.
package jsonlines

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"

	"github.com/nodesnap/nodesnap/collectors"
)

// Array is an array field written one element per line.
type Array struct {
	Name string
	N    int
	Elem func(i int) any
}

// Write writes the object head (whose long arrays are hidden by
// shadowing fields) followed by arrays, one element per line.
func Write(env *collectors.Env, name string, head any, arrays ...Array) error {
	f, err := env.Create(name)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 64<<10)
	j := &Writer{W: w}
	j.Object(head)
	for _, a := range arrays {
		j.Str(`,"` + a.Name + `":[`)
		for i := 0; i < a.N; i++ {
			j.Sep(i)
			j.Value(a.Elem(i))
		}
		j.Str("\n]")
	}
	j.Str("}\n")
	werr := j.Err
	if err := w.Flush(); werr == nil {
		werr = err
	}
	if err := f.Close(); werr == nil {
		werr = err
	}
	if werr != nil {
		return fmt.Errorf("writing %s: %w", name, werr)
	}
	return nil
}

// NonNil is s, or an empty slice for nil (JSON [] rather than null).
func NonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// Writer writes JSON pieces, keeping the first error.
type Writer struct {
	W   io.Writer
	Err error
}

// Str writes s as it is.
func (j *Writer) Str(s string) {
	if j.Err == nil {
		_, j.Err = io.WriteString(j.W, s)
	}
}

// Bytes writes b, already encoded.
func (j *Writer) Bytes(b []byte) {
	if j.Err == nil {
		_, j.Err = j.W.Write(b)
	}
}

// Value writes v encoded.
func (j *Writer) Value(v any) {
	if j.Err != nil {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		j.Err = err
		return
	}
	_, j.Err = j.W.Write(b)
}

// Object writes v, an object, without its closing brace, so that fields
// can follow.
func (j *Writer) Object(v any) {
	if j.Err != nil {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		j.Err = err
		return
	}
	if len(b) < 2 || b[len(b)-1] != '}' {
		j.Err = fmt.Errorf("internal error: %T is not a JSON object", v)
		return
	}
	b = b[:len(b)-1]
	if len(b) == 1 {
		// An empty object: the next field must not start with a comma.
		j.Err = fmt.Errorf("internal error: %T has no fields", v)
		return
	}
	_, j.Err = j.W.Write(b)
}

// Sep starts the i-th element of an array on a new line.
func (j *Writer) Sep(i int) {
	if i > 0 {
		j.Str(",\n")
	} else {
		j.Str("\n")
	}
}
