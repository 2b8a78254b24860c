// Package intern makes the strings of cached objects that repeat across
// objects (label keys and values, namespaces, owner kinds and names, node
// and image names, condition reasons) share one copy, through Go's unique
// package. A decoded object holds a copy of its own of every string; a
// cache of 50,000 pods holds 50,000 copies of "kubernetes.io/hostname".
//
// Guarantees:
//   - Apply changes no value: every string it replaces is replaced by an
//     equal one, and every map by an equal one;
//   - strings that name one object only are left alone, so that they do
//     not cost an entry in the unique map: metadata's name, uid,
//     resourceVersion and selfLink, and fields named podIP, ip, hostIPs'
//     ip, containerID;
//   - a type is walked by a walker compiled once per type (reflection).
//
// Non-guarantees:
//   - sharing spans one garbage collection: the unique map drops a string
//     once no handle holds it, which is at once, since objects hold the
//     string and not its handle; a string decoded after a collection may
//     get a copy of its own, shared from then on. A cache holds a few
//     copies of a value, not one per object;
//   - a recursive type is interned down to its first recursion only;
//   - values of maps are interned only when they are strings.
package intern

import (
	"reflect"
	"strings"
	"sync"
	"unique"
)

// skipped are the JSON names of fields whose strings name one object
// only: interning them would cost more than it saves.
var skipped = map[string]bool{
	"podIP":       true,
	"ip":          true,
	"containerID": true,
}

// metadataSkipped are the fields of ObjectMeta left alone.
var metadataSkipped = map[string]bool{
	"name":            true,
	"uid":             true,
	"resourceVersion": true,
	"selfLink":        true,
	"managedFields":   true,
}

// walker is what interning does to one value of a type.
type walker struct {
	kind   reflect.Kind
	fields []fieldWalker // struct
	elem   *walker       // pointer, slice, array; map values
	mapKey bool          // map: its keys are strings
}

type fieldWalker struct {
	index int
	w     *walker
}

var walkers sync.Map // reflect.Type → *walker (nil: nothing to intern)

// Apply interns the strings of obj, a pointer to a struct; other values
// pass untouched.
func Apply(obj any) {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return
	}
	if w := walkerOf(v.Type()); w != nil {
		w.walk(v)
	}
}

// String returns the shared copy of s.
func String(s string) string {
	if s == "" {
		return s
	}
	return unique.Make(s).Value()
}

func walkerOf(t reflect.Type) *walker {
	if w, ok := walkers.Load(t); ok {
		return w.(*walker)
	}
	w := compile(t, "", map[reflect.Type]bool{})
	walkers.Store(t, w)
	return w
}

// compile returns the walker of t (nil when t holds no string to intern).
// field is the JSON name t's value sits under; open are the types being
// compiled, so that a recursive type stops at its recursion.
func compile(t reflect.Type, field string, open map[reflect.Type]bool) *walker {
	if open[t] {
		return nil
	}
	switch t.Kind() {
	case reflect.String:
		if skipped[field] {
			return nil
		}
		return &walker{kind: reflect.String}
	case reflect.Pointer, reflect.Slice, reflect.Array:
		if e := compile(t.Elem(), field, open); e != nil {
			return &walker{kind: t.Kind(), elem: e}
		}
		return nil
	case reflect.Map:
		keys := t.Key().Kind() == reflect.String
		var vals *walker
		if t.Elem().Kind() == reflect.String {
			vals = &walker{kind: reflect.String}
		}
		if !keys && vals == nil {
			return nil
		}
		return &walker{kind: reflect.Map, mapKey: keys, elem: vals}
	case reflect.Struct:
		open[t] = true
		defer delete(open, t)
		w := &walker{kind: reflect.Struct}
		isMeta := t.Name() == "ObjectMeta"
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" || (isMeta && metadataSkipped[name]) {
				continue
			}
			if fw := compile(f.Type, name, open); fw != nil {
				w.fields = append(w.fields, fieldWalker{index: i, w: fw})
			}
		}
		if len(w.fields) == 0 {
			return nil
		}
		return w
	}
	return nil
}

func (w *walker) walk(v reflect.Value) {
	switch w.kind {
	case reflect.String:
		if s := v.String(); s != "" {
			v.SetString(String(s))
		}
	case reflect.Pointer:
		if !v.IsNil() {
			w.elem.walk(v.Elem())
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			w.elem.walk(v.Index(i))
		}
	case reflect.Struct:
		for _, f := range w.fields {
			f.w.walk(v.Field(f.index))
		}
	case reflect.Map:
		w.walkMap(v)
	}
}

// walkMap replaces v by an equal map whose string keys, and string values,
// are shared copies. Keys cannot be replaced in place.
func (w *walker) walkMap(v reflect.Value) {
	if v.IsNil() || v.Len() == 0 || !v.CanSet() {
		return
	}
	out := reflect.MakeMapWithSize(v.Type(), v.Len())
	key := reflect.New(v.Type().Key()).Elem()
	val := reflect.New(v.Type().Elem()).Elem()
	it := v.MapRange()
	for it.Next() {
		key.Set(it.Key())
		val.Set(it.Value())
		if w.mapKey {
			key.SetString(String(key.String()))
		}
		if w.elem != nil {
			val.SetString(String(val.String()))
		}
		out.SetMapIndex(key, val)
	}
	v.Set(out)
}
