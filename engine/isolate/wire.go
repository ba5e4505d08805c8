package isolate

import (
	"encoding"
	"encoding/base64"
	"encoding/json"
	"reflect"
	"strings"
	"unicode/utf8"
)

// Requests to workers and their answers travel as JSON, and encoding/json
// turns invalid UTF-8 in a string into U+FFFD. Linux paths are bytes: a
// mount at /mnt/caf\xe9 reached the worker as /mnt/caf\uFFFD, a path that
// does not exist, so a hung mount there was reported "unmounted". Every
// string that crosses the pipe therefore goes through wireString: strings
// that are valid UTF-8 travel as they are, any other (and any that starts
// with the marker) as the marker followed by the base64 of its bytes. The
// marker is a noncharacter that no path or text of ours starts with, and
// that JSON carries unchanged.

const wireMarker = "\U0010FFFE"

// wireString is s in its wire form.
func wireString(s string) string {
	if utf8.ValidString(s) && !strings.HasPrefix(s, wireMarker) {
		return s
	}
	return wireMarker + base64.StdEncoding.EncodeToString([]byte(s))
}

// unwireString undoes wireString. A marked string that is not valid
// base64 is returned as it is.
func unwireString(s string) string {
	rest, ok := strings.CutPrefix(s, wireMarker)
	if !ok {
		return s
	}
	b, err := base64.StdEncoding.DecodeString(rest)
	if err != nil {
		return s
	}
	return string(b)
}

var (
	jsonMarshaler = reflect.TypeFor[json.Marshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
)

// opaque types encode themselves: their strings are not ours to change.
func opaque(t reflect.Type) bool {
	return t.Implements(jsonMarshaler) || t.Implements(textMarshaler) ||
		reflect.PointerTo(t).Implements(jsonMarshaler) || reflect.PointerTo(t).Implements(textMarshaler)
}

// MarshalWire is json.Marshal of v with every string (struct fields, slice
// and array elements, map keys and values, through pointers and
// interfaces) in its wire form. v itself is not changed.
func MarshalWire(v any) ([]byte, error) {
	if v == nil {
		return json.Marshal(v)
	}
	nv, changed := toWire(reflect.ValueOf(v))
	if changed {
		return json.Marshal(nv.Interface())
	}
	return json.Marshal(v)
}

// UnmarshalWire is json.Unmarshal into v (a pointer) followed by undoing
// the wire form of every string MarshalWire changed.
func UnmarshalWire(data []byte, v any) error {
	if err := json.Unmarshal(data, v); err != nil {
		return err
	}
	fromWire(reflect.ValueOf(v))
	return nil
}

// toWire returns v with its strings in wire form, copying only what holds
// a string that changes, and whether anything did.
func toWire(v reflect.Value) (reflect.Value, bool) {
	if !v.IsValid() {
		return v, false
	}
	t := v.Type()
	if t.Kind() != reflect.Interface && t.Kind() != reflect.Pointer && opaque(t) {
		return v, false
	}
	switch t.Kind() {
	case reflect.String:
		s := v.String()
		w := wireString(s)
		if w == s {
			return v, false
		}
		nv := reflect.New(t).Elem()
		nv.SetString(w)
		return nv, true
	case reflect.Pointer:
		if v.IsNil() {
			return v, false
		}
		ev, ch := toWire(v.Elem())
		if !ch {
			return v, false
		}
		p := reflect.New(t.Elem())
		p.Elem().Set(ev)
		return p, true
	case reflect.Interface:
		if v.IsNil() {
			return v, false
		}
		ev, ch := toWire(v.Elem())
		if !ch {
			return v, false
		}
		nv := reflect.New(t).Elem()
		nv.Set(ev)
		return nv, true
	case reflect.Struct:
		var nv reflect.Value
		for i := 0; i < t.NumField(); i++ {
			if !t.Field(i).IsExported() {
				continue
			}
			fv, ch := toWire(v.Field(i))
			if !ch {
				continue
			}
			if !nv.IsValid() {
				nv = reflect.New(t).Elem()
				nv.Set(v)
			}
			nv.Field(i).Set(fv)
		}
		if nv.IsValid() {
			return nv, true
		}
		return v, false
	case reflect.Slice, reflect.Array:
		if t.Kind() == reflect.Slice && (v.IsNil() || t.Elem().Kind() == reflect.Uint8) {
			return v, false // []byte is base64 in JSON: already lossless
		}
		var nv reflect.Value
		for i := 0; i < v.Len(); i++ {
			ev, ch := toWire(v.Index(i))
			if !ch {
				continue
			}
			if !nv.IsValid() {
				if t.Kind() == reflect.Slice {
					nv = reflect.MakeSlice(t, v.Len(), v.Len())
					reflect.Copy(nv, v)
				} else {
					nv = reflect.New(t).Elem()
					nv.Set(v)
				}
			}
			nv.Index(i).Set(ev)
		}
		if nv.IsValid() {
			return nv, true
		}
		return v, false
	case reflect.Map:
		if v.IsNil() {
			return v, false
		}
		changed := false
		type kv struct{ k, v reflect.Value }
		entries := make([]kv, 0, v.Len())
		it := v.MapRange()
		for it.Next() {
			k, kch := toWire(it.Key())
			e, ech := toWire(it.Value())
			changed = changed || kch || ech
			entries = append(entries, kv{k, e})
		}
		if !changed {
			return v, false
		}
		nv := reflect.MakeMapWithSize(t, len(entries))
		for _, e := range entries {
			nv.SetMapIndex(e.k, e.v)
		}
		return nv, true
	}
	return v, false
}

// fromWire undoes the wire form of every string reachable from v, in
// place: v comes from json.Unmarshal, so nothing is shared with a caller.
func fromWire(v reflect.Value) {
	if !v.IsValid() {
		return
	}
	t := v.Type()
	if t.Kind() != reflect.Interface && t.Kind() != reflect.Pointer && opaque(t) {
		return
	}
	switch t.Kind() {
	case reflect.String:
		if v.CanSet() {
			if s := v.String(); strings.HasPrefix(s, wireMarker) {
				v.SetString(unwireString(s))
			}
		}
	case reflect.Pointer:
		if !v.IsNil() {
			fromWire(v.Elem())
		}
	case reflect.Interface:
		if v.IsNil() || !v.CanSet() {
			return
		}
		e := reflect.New(v.Elem().Type()).Elem()
		e.Set(v.Elem())
		fromWire(e)
		v.Set(e)
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			if t.Field(i).IsExported() {
				fromWire(v.Field(i))
			}
		}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return
		}
		for i := 0; i < v.Len(); i++ {
			fromWire(v.Index(i))
		}
	case reflect.Map:
		if v.IsNil() {
			return
		}
		keys := v.MapKeys()
		for _, k := range keys {
			nk := reflect.New(t.Key()).Elem()
			nk.Set(k)
			fromWire(nk)
			ne := reflect.New(t.Elem()).Elem()
			ne.Set(v.MapIndex(k))
			fromWire(ne)
			if !nk.Equal(k) {
				v.SetMapIndex(k, reflect.Value{})
			}
			v.SetMapIndex(nk, ne)
		}
	}
}
