package mounts

import (
	"bufio"
	"fmt"
	"io"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/collectors/internal/shared"
)

// Writing mounts.json as it is built: a small streaming JSON writer.

// mntWriteReport writes mounts.json as ordinary JSON laid out one mount,
// one process list and one device per line: compact enough to write and
// compress quickly when there are thousands of mounts, and in lines the
// redactor reads one at a time.
func mntWriteReport(env *collectors.Env, rep *layout.MountsReport) error {
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
	bw := &shared.JSONWriter{W: w}
	head := *rep
	head.Namespaces, head.Devices = nil, nil
	bw.Object(struct {
		*layout.MountsReport
		Namespaces *struct{} `json:"namespaces,omitempty"`
		Devices    *struct{} `json:"devices,omitempty"`
	}{MountsReport: &head})
	bw.Str(`,"namespaces":[`)
	for i := range rep.Namespaces {
		ns := &rep.Namespaces[i]
		bw.Sep(i)
		bw.Object(struct {
			*layout.MountNamespace
			Processes *struct{} `json:"processes,omitempty"`
			Mounts    *struct{} `json:"mounts,omitempty"`
		}{MountNamespace: ns})
		bw.Str(`,"processes":`)
		bw.Value(shared.NonNil(ns.Processes))
		bw.Str(`,"mounts":[`)
		for j := range ns.Mounts {
			bw.Sep(j)
			bw.Value(&ns.Mounts[j])
		}
		bw.Str("\n]}")
	}
	bw.Str("\n],\n\"devices\":[")
	for i := range rep.Devices {
		bw.Sep(i)
		bw.Value(&rep.Devices[i])
	}
	bw.Str("\n]}\n")
	return bw.Err
}
