// Package prune drops, from the objects an informer caches, the fields no
// reader of that informer reads, before they reach the cache. A Plan is
// compiled once per Go type and set of field paths, and applied to every
// object the informer receives (as part of its transform).
//
// A path names a field by its JSON name, dot-separated from the object's
// root: "spec.nodeName", "status", "spec.containers.resources". A path
// keeps its field whole, and everything under it. A path may go through
// pointers and through lists of structs (each element keeps the same
// fields); it cannot go into a map, which is kept or dropped whole. A
// struct embedded inline (TypeMeta, VolumeSource) is seen through, as
// JSON sees it.
//
// Guarantees:
//   - metadata, apiVersion and kind are always kept whole: informers key
//     objects by name and namespace, and handlers compare resourceVersions;
//   - a Plan with no paths beyond those keeps the object's metadata only;
//   - Compile rejects a path that names no field of the type, naming the
//     path, the field and the fields there are;
//   - Apply changes only the fields a Plan drops, to their zero values, and
//     leaves objects of another type, and nil ones, untouched.
//
// Non-guarantees: a Plan does not know what its readers read, only what
// they declared; a reader that reads a dropped field reads its zero value.
// The host catches that in tests (controllertest prunes fixtures with the
// declared Plan), not at run time.
package prune

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// always are the root fields every Plan keeps.
var always = []string{"apiVersion", "kind", "metadata"}

// Plan keeps the named fields of objects of one Go struct type (the type a
// pointer to which the informer holds) and zeroes the others.
type Plan struct {
	typ   reflect.Type
	paths []string // normalised: sorted, no path under another; nil: all
	root  *node    // nil: keep everything
}

// node is what a Plan does to one struct value: zero some fields, and go
// into others.
type node struct {
	ops []op
}

// op is one field of a struct: zeroed (sub is nil) or partly kept.
type op struct {
	index []int
	name  string
	sub   *node
}

// All returns the Plan that keeps every field of typ's objects.
func All(typ reflect.Type) *Plan { return &Plan{typ: typ} }

// Compile returns the Plan that keeps, of objects of typ (a struct type),
// the fields paths name, and metadata, apiVersion and kind.
func Compile(typ reflect.Type, paths []string) (*Plan, error) {
	if typ.Kind() != reflect.Struct {
		return nil, fmt.Errorf("%v is not a struct type", typ)
	}
	norm, err := normalise(typ, append(slices.Clone(paths), always...))
	if err != nil {
		return nil, err
	}
	root, err := build(typ, norm, "")
	if err != nil {
		return nil, err
	}
	return &Plan{typ: typ, paths: norm, root: root}, nil
}

// normalise checks each path against typ, and returns them sorted, with
// duplicates and paths under another one dropped.
func normalise(typ reflect.Type, paths []string) ([]string, error) {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		if err := check(typ, p); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	slices.Sort(out)
	out = slices.Compact(out)
	return slices.DeleteFunc(out, func(p string) bool {
		for _, q := range out {
			if under(p, q) {
				return true
			}
		}
		return false
	}), nil
}

// under reports whether path p lies strictly under path q.
func under(p, q string) bool {
	return len(p) > len(q) && strings.HasPrefix(p, q) && p[len(q)] == '.'
}

// check reports whether path names a field of typ, and why not.
func check(typ reflect.Type, path string) error {
	if path == "" {
		return fmt.Errorf("an empty field path for %v: name a field, such as \"spec\"",
			typ.Name())
	}
	t := typ
	seen := ""
	for name := range strings.SplitSeq(path, ".") {
		st, err := structOf(t)
		if err != nil {
			return fmt.Errorf("field path %q of %v: %s is %v, which has no fields: "+
				"name %s whole", path, typ.Name(), seen, t, seen)
		}
		f, ok := fieldsOf(st)[name]
		if !ok {
			return fmt.Errorf("field path %q of %v: %v has no field %q (it has %s)",
				path, typ.Name(), st.Name(), name, strings.Join(names(st), ", "))
		}
		t = f.typ
		seen = strings.TrimPrefix(seen+"."+name, ".")
	}
	return nil
}

// structOf returns the struct type t holds: t itself, or what a pointer,
// a list or a list of pointers holds.
func structOf(t reflect.Type) (reflect.Type, error) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("%v is not a struct", t)
	}
	return t, nil
}

// field is a JSON-visible field of a struct, inline ones seen through.
type field struct {
	index []int
	typ   reflect.Type
}

// fieldsOf returns the JSON-visible fields of st by JSON name.
func fieldsOf(st reflect.Type) map[string]field {
	out := map[string]field{}
	var walk func(t reflect.Type, prefix []int)
	walk = func(t reflect.Type, prefix []int) {
		for i := range t.NumField() {
			f := t.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" || !f.IsExported() {
				continue
			}
			idx := append(slices.Clone(prefix), i)
			inline := strings.Contains(opts, "inline") || (f.Anonymous && name == "")
			if inline && f.Type.Kind() == reflect.Struct {
				walk(f.Type, idx)
				continue
			}
			if name == "" {
				name = f.Name
			}
			out[name] = field{index: idx, typ: f.Type}
		}
	}
	walk(st, nil)
	return out
}

// names returns st's JSON field names, sorted.
func names(st reflect.Type) []string {
	var out []string
	for n := range fieldsOf(st) {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// build returns what keeping paths (relative to st, normalised) does to a
// value of st; nil when it keeps st whole.
func build(st reflect.Type, paths []string, at string) (*node, error) {
	if slices.Contains(paths, "") {
		return nil, nil
	}
	kept := map[string][]string{} // field name → its paths, relative
	for _, p := range paths {
		head, rest, _ := strings.Cut(p, ".")
		kept[head] = append(kept[head], rest)
	}
	fields := fieldsOf(st)
	n := &node{}
	for _, name := range names(st) {
		f := fields[name]
		sub, ok := kept[name]
		if !ok {
			n.ops = append(n.ops, op{index: f.index, name: name})
			continue
		}
		if slices.Contains(sub, "") {
			continue
		}
		inner, err := structOf(f.typ)
		if err != nil {
			return nil, fmt.Errorf("%s%s: %w", at, name, err)
		}
		child, err := build(inner, sub, at+name+".")
		if err != nil {
			return nil, err
		}
		if child != nil {
			n.ops = append(n.ops, op{index: f.index, name: name, sub: child})
		}
	}
	return n, nil
}

// Type is the Go type the Plan is for.
func (p *Plan) Type() reflect.Type { return p.typ }

// KeepsAll reports whether the Plan keeps every field.
func (p *Plan) KeepsAll() bool { return p.root == nil }

// Paths returns the fields the Plan keeps, normalised (sorted, none under
// another, metadata, apiVersion and kind included); nil when it keeps all.
func (p *Plan) Paths() []string { return slices.Clone(p.paths) }

// Covers reports whether p keeps every field q keeps: whether a reader
// that declared q may read what p leaves.
func (p *Plan) Covers(q *Plan) bool {
	if p.root == nil {
		return true
	}
	if q.root == nil || p.typ != q.typ {
		return false
	}
	for _, path := range q.paths {
		if !slices.ContainsFunc(p.paths, func(mine string) bool {
			return mine == path || under(path, mine)
		}) {
			return false
		}
	}
	return true
}

// Union returns the Plan that keeps what p or q keeps. Both must be for
// the same type.
func (p *Plan) Union(q *Plan) *Plan {
	if p.root == nil || q.typ != p.typ {
		return p
	}
	if q.root == nil {
		return q
	}
	u, err := Compile(p.typ, append(slices.Clone(p.paths), q.paths...))
	if err != nil {
		// Both were compiled for this type, so their paths are its own;
		// were they not, keeping everything is the safe answer.
		return All(p.typ)
	}
	return u
}

// String lists what the Plan keeps.
func (p *Plan) String() string {
	if p.root == nil {
		return "all"
	}
	return strings.Join(p.paths, ",")
}

// Apply zeroes, in obj (a pointer to the Plan's type), every field the
// Plan does not keep. Other values pass untouched.
func (p *Plan) Apply(obj any) {
	if p.root == nil {
		return
	}
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Type().Elem() != p.typ {
		return
	}
	p.root.apply(v.Elem())
}

func (n *node) apply(v reflect.Value) {
	for i := range n.ops {
		o := &n.ops[i]
		var f reflect.Value
		if len(o.index) == 1 {
			f = v.Field(o.index[0])
		} else {
			var err error
			if f, err = v.FieldByIndexErr(o.index); err != nil {
				continue // through a nil embedded pointer: nothing there
			}
		}
		if o.sub == nil {
			f.SetZero()
			continue
		}
		o.sub.into(f)
	}
}

// into applies n to what v holds: a struct, or through pointers and lists.
func (n *node) into(v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		n.apply(v)
	case reflect.Pointer:
		if !v.IsNil() {
			n.into(v.Elem())
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			n.into(v.Index(i))
		}
	}
}
