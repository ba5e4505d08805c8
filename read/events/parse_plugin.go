package events

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Headers and keys of node plugins' own formats that the general readers
// leave out: Python logging's location ("[module - line:function]"), a
// request ID in brackets, a line holding several JSON records, and an
// NVMe-oF subsystem's name.

var (
	// rePyLocation is Python logging's "[%(module)s - %(lineno)d:
	// %(funcName)s] - " after the level (kadalu's node plugin): the
	// function is the call the record is about when it is a CSI method.
	rePyLocation = lazy(`^\[([\w.]+) - (\d+):(\w+)\] - `)
	// reTrailingFields are "key=value" pairs a message ends with (a
	// logger that appends its context to the text).
	reTrailingFields = lazy(`(?:\s+[A-Za-z_][\w.-]*=[^\s=]+)+\s*$`)
	// reCSIMethodName is a CSI RPC's name as a function's.
	reCSIMethodName = lazy(`^(?:Node|Controller)(?:Stage|Unstage|Publish|Unpublish|Expand|GetVolumeStats)\w*$`)
	// reBracketRequest is a request ID in brackets opening a message
	// ("[requestID:3981693433] ...", huawei-csi's).
	reBracketRequest = lazy(`^\[(?:requestID|request_id|reqID|RequestID|req-id)[:=]\s*([^\]\s]+)\]\s*`)
	// reISOBracket is a writer's own date and time in brackets ("[2023-06-16
	// 10:39:25,517]"), not the kernel's ring stamp.
	reISOBracket = lazy(`^\[(\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d)(?:[.,](\d+))?(Z|[+-]\d\d:?\d\d)?\]`)
)

// pyLocation reads Python logging's location after the level: the module
// becomes the component, the function the record's function, and the
// "key=value" pairs the message ends with its fields.
func pyLocation(r *record) {
	m := rePyLocation.FindStringSubmatch(r.msg)
	if m == nil {
		return
	}
	if r.ev.Component == "" {
		r.ev.Component = m[1]
	}
	r.fn = m[3]
	r.msg = r.msg[len(m[0]):]
	if t := reTrailingFields.FindString(r.msg); t != "" {
		r.fields = append(r.fields, logfmt([]byte(strings.TrimSpace(t)))...)
	}
}

// pyGRPCServerFailure says whether a record is Python gRPC's server
// logging a handler that raised: its logger (grpc._server) or its
// location (module _server, function _call_behavior).
func pyGRPCServerFailure(r *record) bool {
	return strings.HasPrefix(r.ev.Component, "grpc.") || r.ev.Component == "_server" && strings.HasPrefix(r.fn, "_call_")
}

// jsonRecords splits a line holding several JSON records one after
// another ("{...} {...}", as a paste or a logger without newlines joins
// them); nil when the line is one record or not JSON.
func jsonRecords(rec []byte) [][]byte {
	b := bytes.TrimSpace(rec)
	if len(b) < 2 || b[0] != '{' || !bytes.Contains(b, []byte("}")) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	var out [][]byte
	for dec.More() {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil || len(raw) == 0 || raw[0] != '{' {
			return nil
		}
		out = append(out, raw)
		if len(out) > 16 {
			return nil
		}
	}
	if len(out) < 2 {
		return nil
	}
	return out
}
