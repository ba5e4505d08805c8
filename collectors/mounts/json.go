package mounts

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/collectors/internal/jsonlines"
)

// Writing mounts.json as it is built: a small streaming JSON writer.

// writeReport writes mounts.json as ordinary JSON laid out one mount,
// one process list and one device per line: compact enough to write and
// compress quickly when there are thousands of mounts, and in lines the
// redactor reads one at a time.
func writeReport(env *collectors.Env, rep *layout.MountsReport) error {
	f, err := env.Create(layout.MountsFile)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 64<<10)
	werr := encodeReport(w, rep)
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

// encodeReport writes rep as JSON. Objects are marshalled without their
// long arrays, which are appended element by element.
func encodeReport(w io.Writer, rep *layout.MountsReport) error {
	bw := &jsonlines.Writer{W: w}
	head := *rep
	head.Namespaces, head.Devices, head.Tables = nil, nil, nil
	bw.Object(struct {
		*layout.MountsReport
		Tables     *struct{} `json:"tables,omitempty"`
		Namespaces *struct{} `json:"namespaces,omitempty"`
		Devices    *struct{} `json:"devices,omitempty"`
	}{MountsReport: &head})
	var buf []byte
	mounts := func(ms []layout.NamespaceMount) {
		bw.Str(`,"mounts":[`)
		for j := range ms {
			bw.Sep(j)
			buf = appendMount(buf[:0], &ms[j])
			bw.Bytes(buf)
		}
		bw.Str("\n]}")
	}
	// The tables first: a reader streaming the namespaces knows them.
	if len(rep.Tables) > 0 {
		bw.Str(`,"tables":[`)
		for i := range rep.Tables {
			bw.Sep(i)
			bw.Str(`{"hash":`)
			bw.Value(rep.Tables[i].Hash)
			mounts(rep.Tables[i].Mounts)
		}
		bw.Str("\n]")
	}
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
		bw.Value(jsonlines.NonNil(ns.Processes))
		if ns.Table != "" {
			// Its mounts are its table's, numbered by mount_ids.
			bw.Str("}")
			continue
		}
		mounts(ns.Mounts)
	}
	bw.Str("\n],\n\"devices\":[")
	for i := range rep.Devices {
		bw.Sep(i)
		bw.Value(&rep.Devices[i])
	}
	bw.Str("\n]}\n")
	return bw.Err
}

// appendMount appends m as encoding/json would marshal it, byte for byte
// (TestAppendMountIsMarshal), without reflection: mounts.json holds one of
// these per mount of every namespace, and reflection was most of the
// collector's encoding time.
func appendMount(b []byte, m *layout.NamespaceMount) []byte {
	b = append(b, `{"mount_id":`...)
	b = strconv.AppendInt(b, int64(m.ID), 10)
	b = append(b, `,"parent_id":`...)
	b = strconv.AppendInt(b, int64(m.ParentID), 10)
	b = append(b, `,"major":`...)
	b = strconv.AppendUint(b, uint64(m.Major), 10)
	b = append(b, `,"minor":`...)
	b = strconv.AppendUint(b, uint64(m.Minor), 10)
	b = append(b, `,"root":`...)
	b = appendJSONString(b, m.Root)
	b = append(b, `,"mount_point":`...)
	b = appendJSONString(b, m.MountPoint)
	b = append(b, `,"options":`...)
	b = appendStrings(b, m.Options)
	if len(m.Optional) > 0 {
		b = append(b, `,"optional":`...)
		b = appendStrings(b, m.Optional)
	}
	b = append(b, `,"propagation":{`...)
	sep := ""
	p := m.Propagation
	for _, f := range []struct {
		name string
		v    int
	}{{"shared", p.Shared}, {"master", p.Master}, {"propagate_from", p.PropagateFrom}} {
		if f.v != 0 {
			b = append(b, sep+`"`+f.name+`":`...)
			b = strconv.AppendInt(b, int64(f.v), 10)
			sep = ","
		}
	}
	if p.Unbindable {
		b = append(b, sep+`"unbindable":true`...)
	}
	b = append(b, `},"fs_type":`...)
	b = appendJSONString(b, m.FSType)
	b = append(b, `,"source":`...)
	b = appendJSONString(b, m.Source)
	b = append(b, `,"super_options":`...)
	b = appendJSONString(b, m.SuperOptions)
	b = append(b, `,"propagation_type":`...)
	b = appendJSONString(b, m.PropagationType)
	b = append(b, `,"class":`...)
	b = appendJSONString(b, m.Class)
	return append(b, '}')
}

// appendStrings appends a []string as encoding/json does (nil is null).
func appendStrings(b []byte, ss []string) []byte {
	if ss == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, s)
	}
	return append(b, ']')
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s quoted as encoding/json does with its
// default HTML escaping: <, > and & as \u00XX, invalid UTF-8 as \ufffd,
// U+2028 and U+2029 escaped.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
