package collectors

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"

	"github.com/nodesnap/nodesnap/bundle/layout"
)

// Writing mounts.json as it is built: a small streaming JSON writer.

// mntWriteReport writes mounts.json as ordinary JSON laid out one mount,
// one process list and one device per line: compact enough to write and
// compress quickly when there are thousands of mounts, and in lines the
// redactor reads one at a time.
func mntWriteReport(env *Env, rep *layout.MountsReport) error {
	f, err := env.Create(layout.MountsFile)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 64<<10)
	werr := mntEncodeReport(w, rep)
	if err := w.Flush(); werr == nil {
		werr = err
	}
	if err := f.Close(); werr == nil {
		werr = err
	}
	if werr != nil {
		return fmt.Errorf("writing mounts.json: %w", werr)
	}
	return nil
}

// mntEncodeReport writes rep as JSON. Objects are marshalled without their
// long arrays, which are appended element by element.
func mntEncodeReport(w io.Writer, rep *layout.MountsReport) error {
	bw := &mntJSONWriter{w: w}
	head := *rep
	head.Namespaces, head.Devices = nil, nil
	bw.object(struct {
		*layout.MountsReport
		Namespaces *struct{} `json:"namespaces,omitempty"`
		Devices    *struct{} `json:"devices,omitempty"`
	}{MountsReport: &head})
	bw.str(`,"namespaces":[`)
	for i := range rep.Namespaces {
		ns := &rep.Namespaces[i]
		bw.sep(i)
		bw.object(struct {
			*layout.MountNamespace
			Processes *struct{} `json:"processes,omitempty"`
			Mounts    *struct{} `json:"mounts,omitempty"`
		}{MountNamespace: ns})
		bw.str(`,"processes":`)
		bw.value(nonNil(ns.Processes))
		bw.str(`,"mounts":[`)
		for j := range ns.Mounts {
			bw.sep(j)
			bw.value(&ns.Mounts[j])
		}
		bw.str("\n]}")
	}
	bw.str("\n],\n\"devices\":[")
	for i := range rep.Devices {
		bw.sep(i)
		bw.value(&rep.Devices[i])
	}
	bw.str("\n]}\n")
	return bw.err
}

// mntJSONArray is an array field written one element per line.
type mntJSONArray struct {
	name string
	n    int
	elem func(i int) any
}

// mntWriteJSONLines writes the object head (whose long arrays are hidden by
// shadowing fields) followed by arrays, one element per line.
func mntWriteJSONLines(env *Env, name string, head any, arrays ...mntJSONArray) error {
	f, err := env.Create(name)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 64<<10)
	j := &mntJSONWriter{w: w}
	j.object(head)
	for _, a := range arrays {
		j.str(`,"` + a.name + `":[`)
		for i := 0; i < a.n; i++ {
			j.sep(i)
			j.value(a.elem(i))
		}
		j.str("\n]")
	}
	j.str("}\n")
	werr := j.err
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

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// mntJSONWriter writes JSON pieces, keeping the first error.
type mntJSONWriter struct {
	w   io.Writer
	err error
}

func (j *mntJSONWriter) str(s string) {
	if j.err == nil {
		_, j.err = io.WriteString(j.w, s)
	}
}

func (j *mntJSONWriter) value(v any) {
	if j.err != nil {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		j.err = err
		return
	}
	_, j.err = j.w.Write(b)
}

// object writes v, an object, without its closing brace, so that fields
// can follow.
func (j *mntJSONWriter) object(v any) {
	if j.err != nil {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		j.err = err
		return
	}
	if len(b) < 2 || b[len(b)-1] != '}' {
		j.err = fmt.Errorf("internal error: %T is not a JSON object", v)
		return
	}
	b = b[:len(b)-1]
	if len(b) == 1 {
		// An empty object: the next field must not start with a comma.
		j.err = fmt.Errorf("internal error: %T has no fields", v)
		return
	}
	_, j.err = j.w.Write(b)
}

// sep starts the i-th element of an array on a new line.
func (j *mntJSONWriter) sep(i int) {
	if i > 0 {
		j.str(",\n")
	} else {
		j.str("\n")
	}
}
