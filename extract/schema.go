package extract

import (
	"encoding/json"
	"go/ast"
	"go/token"
	"go/types"
	"math"
	"reflect"
	"strings"

	"github.com/okengine/oke/extract/internal/urlparams"
	"github.com/okengine/oke/internal/constraint"
)

// This file writes JSON Schemas (2020-12, the dialect of OpenAPI 3.1) for
// flows' input and output types, from go/types, following encoding/json:
// json tags name fields, omitempty (or omitzero) makes a field optional,
// json:"-" drops it, embedded structs promote their fields (Go's rules for
// conflicts), a pointer, slice or map may be null, time.Time is a date-time
// string, []byte a base64 string, json.RawMessage and interfaces anything,
// and a type with its own MarshalJSON anything (a TextMarshaler a string).
// Named struct types become definitions, referenced by name.

// schemaGen builds schemas and collects the definitions they refer to.
type schemaGen struct {
	prog  *program
	names map[*types.TypeName]map[string]string // type → type args key → def name
	taken map[string]bool
	defs  map[string]any
	docs  map[token.Pos]string // doc comments of fields and types, by name position
}

// ref marks a reference to a definition, resolved when the schema is
// written (#/$defs/NAME or #/components/schemas/NAME).
type ref string

func newSchemaGen(prog *program) *schemaGen {
	g := &schemaGen{prog: prog, names: map[*types.TypeName]map[string]string{}, taken: map[string]bool{}, defs: map[string]any{}, docs: map[token.Pos]string{}}
	for _, p := range prog.sortedBodyPkgs() {
		for _, f := range p.files {
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.GenDecl:
					if len(n.Specs) == 1 && n.Doc != nil {
						if ts, ok := n.Specs[0].(*ast.TypeSpec); ok && ts.Doc == nil {
							g.docs[ts.Name.Pos()] = docText(n.Doc)
						}
					}
				case *ast.TypeSpec:
					if n.Doc != nil {
						g.docs[n.Name.Pos()] = docText(n.Doc)
					}
				case *ast.Field:
					text := ""
					if n.Doc != nil {
						text = docText(n.Doc)
					} else if n.Comment != nil {
						text = docText(n.Comment)
					}
					if text != "" {
						for _, name := range n.Names {
							g.docs[name.Pos()] = text
						}
					}
				}
				return true
			})
		}
	}
	return g
}

func docText(cg *ast.CommentGroup) string {
	return strings.Join(strings.Fields(cg.Text()), " ")
}

// standalone returns a JSON Schema document for t, with the definitions it
// uses under $defs.
func (g *schemaGen) standalone(t types.Type) Schema {
	if t == nil {
		return Schema(`{}`)
	}
	s := g.schema(t)
	used := map[string]bool{}
	g.collectRefs(s, used)
	out := map[string]any{}
	switch x := s.(type) {
	case map[string]any:
		for k, v := range x {
			out[k] = v
		}
	case ref:
		out["$ref"] = "#/$defs/" + string(x) // a sibling of $defs, as 2020-12 allows
	}
	if len(used) > 0 {
		defs := map[string]any{}
		for name := range used {
			defs[name] = g.defs[name]
		}
		out["$defs"] = defs
	}
	out["$schema"] = "https://json-schema.org/draft/2020-12/schema"
	return mustJSON(resolveRefs(out, "#/$defs/"))
}

// collectRefs adds to used every definition s refers to, transitively.
func (g *schemaGen) collectRefs(s any, used map[string]bool) {
	switch x := s.(type) {
	case ref:
		if !used[string(x)] {
			used[string(x)] = true
			g.collectRefs(g.defs[string(x)], used)
		}
	case map[string]any:
		for _, v := range x {
			g.collectRefs(v, used)
		}
	case []any:
		for _, v := range x {
			g.collectRefs(v, used)
		}
	}
}

// resolveRefs returns a copy of s with every ref written as {"$ref": prefix+name}.
func resolveRefs(s any, prefix string) any {
	switch x := s.(type) {
	case ref:
		return map[string]any{"$ref": prefix + string(x)}
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, v := range x {
			out[k] = resolveRefs(v, prefix)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, v := range x {
			out[i] = resolveRefs(v, prefix)
		}
		return out
	}
	return s
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only maps, slices, strings, numbers and bools
	}
	return b
}

// schema returns the schema of t (with refs).
func (g *schemaGen) schema(t types.Type) any {
	t = types.Unalias(t)
	if s, ok := g.special(t); ok {
		return s
	}
	if n, ok := t.(*types.Named); ok {
		if _, isStruct := n.Underlying().(*types.Struct); isStruct {
			return g.define(n)
		}
		return g.schema(n.Underlying())
	}
	switch u := t.Underlying().(type) {
	case *types.Basic:
		return basicSchema(u)
	case *types.Pointer:
		return nullable(g.schema(u.Elem()))
	case *types.Slice:
		if b, ok := u.Elem().Underlying().(*types.Basic); ok && b.Kind() == types.Byte {
			if _, named := types.Unalias(u.Elem()).(*types.Named); !named {
				return nullable(map[string]any{"type": "string", "contentEncoding": "base64"})
			}
		}
		return map[string]any{"type": []any{"array", "null"}, "items": g.schema(u.Elem())}
	case *types.Array:
		return map[string]any{"type": "array", "items": g.schema(u.Elem()), "minItems": u.Len(), "maxItems": u.Len()}
	case *types.Map:
		return map[string]any{"type": []any{"object", "null"}, "additionalProperties": g.schema(u.Elem())}
	case *types.Struct:
		return g.object(u, false)
	case *types.Interface:
		return map[string]any{}
	}
	return map[string]any{} // chan, func: not JSON
}

// special handles the types encoding/json treats specially.
func (g *schemaGen) special(t types.Type) (any, bool) {
	if n, ok := t.(*types.Named); ok && n.Obj().Pkg() != nil {
		switch n.Obj().Pkg().Path() + "." + n.Obj().Name() {
		case "time.Time":
			return map[string]any{"type": "string", "format": "date-time"}, true
		case "time.Duration":
			return map[string]any{"type": "integer", "description": "a duration in nanoseconds"}, true
		case "encoding/json.RawMessage":
			return map[string]any{}, true
		case "encoding/json.Number":
			return map[string]any{"type": "number"}, true
		}
	}
	if _, isPtr := t.(*types.Pointer); isPtr {
		return nil, false
	}
	if _, isIface := t.Underlying().(*types.Interface); isIface {
		return nil, false
	}
	if hasMethod(t, "MarshalJSON") {
		return map[string]any{"description": "encoded by its own MarshalJSON"}, true
	}
	if hasMethod(t, "MarshalText") {
		return map[string]any{"type": "string"}, true
	}
	return nil, false
}

func hasMethod(t types.Type, name string) bool {
	for _, tt := range []types.Type{t, types.NewPointer(t)} {
		ms := types.NewMethodSet(tt)
		for i := 0; i < ms.Len(); i++ {
			if ms.At(i).Obj().Name() == name {
				return true
			}
		}
	}
	return false
}

func basicSchema(b *types.Basic) any {
	switch {
	case b.Info()&types.IsBoolean != 0:
		return map[string]any{"type": "boolean"}
	case b.Info()&types.IsString != 0:
		return map[string]any{"type": "string"}
	case b.Info()&types.IsInteger != 0:
		// The bounds encoding/json decodes into (a larger number is 400
		// InvalidInput); int and uint as on 64-bit platforms.
		s := map[string]any{"type": "integer"}
		switch b.Kind() {
		case types.Int8:
			s["minimum"], s["maximum"] = math.MinInt8, math.MaxInt8
		case types.Int16:
			s["minimum"], s["maximum"] = math.MinInt16, math.MaxInt16
		case types.Int32:
			s["format"] = "int32"
		case types.Int64, types.Int:
			s["format"] = "int64"
		case types.Uint8:
			s["minimum"], s["maximum"] = 0, math.MaxUint8
		case types.Uint16:
			s["minimum"], s["maximum"] = 0, math.MaxUint16
		case types.Uint32:
			s["minimum"], s["maximum"] = 0, uint64(math.MaxUint32)
		case types.Uint64, types.Uint, types.Uintptr:
			s["minimum"], s["maximum"] = 0, uint64(math.MaxUint64)
		}
		return s
	case b.Info()&types.IsFloat != 0:
		s := map[string]any{"type": "number"}
		if b.Kind() == types.Float32 {
			s["format"] = "float"
		} else {
			s["format"] = "double"
		}
		return s
	}
	return map[string]any{}
}

// nullable returns s, or null.
func nullable(s any) any {
	if m, ok := s.(map[string]any); ok {
		if t, ok := m["type"].(string); ok {
			out := make(map[string]any, len(m))
			for k, v := range m {
				out[k] = v
			}
			out["type"] = []any{t, "null"}
			return out
		}
		if ts, ok := m["type"].([]any); ok {
			for _, x := range ts {
				if x == "null" {
					return m
				}
			}
		}
		if len(m) == 0 {
			return m // anything includes null
		}
	}
	return map[string]any{"anyOf": []any{s, map[string]any{"type": "null"}}}
}

// define adds a named struct type to the definitions and returns a ref.
func (g *schemaGen) define(n *types.Named) any {
	obj := n.Obj()
	key := ""
	if args := n.TypeArgs(); args != nil {
		for i := 0; i < args.Len(); i++ {
			key += "," + types.TypeString(args.At(i), nil)
		}
	}
	if byArgs, ok := g.names[obj]; ok {
		if name, ok := byArgs[key]; ok {
			return ref(name)
		}
	} else {
		g.names[obj] = map[string]string{}
	}
	name := defName(n, false)
	if g.taken[name] {
		name = defName(n, true)
		for i := 2; g.taken[name]; i++ {
			name = defName(n, true) + "_" + itoa(i)
		}
	}
	g.taken[name] = true
	g.names[obj][key] = name
	g.defs[name] = map[string]any{} // recursion
	s := g.object(n.Underlying().(*types.Struct), hasMethod(n, "UnmarshalJSON")).(map[string]any)
	if doc := g.docs[obj.Pos()]; doc != "" {
		s["description"] = doc
	}
	g.defs[name] = s
	return ref(name)
}

// defName is a definition's name: the type's name (with its type
// arguments), qualified by its package's name when qualify.
func defName(n *types.Named, qualify bool) string {
	q := func(p *types.Package) string { return p.Name() }
	s := types.TypeString(n, q)
	if !qualify {
		if i := strings.IndexByte(s, '.'); i >= 0 && (strings.IndexByte(s, '[') < 0 || i < strings.IndexByte(s, '[')) {
			s = s[i+1:]
		}
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return strings.TrimRight(b.String(), "_")
}

// jsonField is a field as encoding/json sees it.
type jsonField struct {
	name      string
	typ       types.Type
	obj       *types.Var
	tag       string // the whole struct tag
	omitempty bool
	asString  bool
	depth     int
	tagged    bool
	viaPtr    bool // promoted through an embedded pointer: may be absent
}

// fields returns the JSON fields of st (encoding/json's typeFields).
func fields(st *types.Struct) []jsonField {
	var all []jsonField
	var walk func(st *types.Struct, depth int, viaPtr bool, seen map[*types.Struct]bool)
	walk = func(st *types.Struct, depth int, viaPtr bool, seen map[*types.Struct]bool) {
		if seen[st] {
			return
		}
		seen[st] = true
		for i := 0; i < st.NumFields(); i++ {
			f := st.Field(i)
			tag := reflect.StructTag(st.Tag(i)).Get("json")
			if tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			ft := f.Type()
			if f.Embedded() && name == "" {
				et, ptr := ft, false
				if p, ok := types.Unalias(et).(*types.Pointer); ok {
					et, ptr = p.Elem(), true
				}
				if est, ok := et.Underlying().(*types.Struct); ok {
					if _, isNamed := types.Unalias(et).(*types.Named); !isNamed || !hasMethod(et, "MarshalJSON") {
						walk(est, depth+1, viaPtr || ptr, seen)
						continue
					}
				}
				if !f.Exported() {
					continue
				}
			} else if !f.Exported() {
				continue
			}
			switch ft.Underlying().(type) {
			case *types.Chan, *types.Signature:
				continue
			}
			jf := jsonField{name: f.Name(), typ: ft, obj: f, tag: st.Tag(i), depth: depth, viaPtr: viaPtr, tagged: name != ""}
			if name != "" {
				jf.name = name
			}
			for _, o := range strings.Split(opts, ",") {
				switch o {
				case "omitempty", "omitzero":
					jf.omitempty = true
				case "string":
					jf.asString = true
				}
			}
			all = append(all, jf)
		}
		delete(seen, st)
	}
	walk(st, 0, false, map[*types.Struct]bool{})
	byName := map[string][]jsonField{}
	var order []string
	for _, f := range all {
		if _, ok := byName[f.name]; !ok {
			order = append(order, f.name)
		}
		byName[f.name] = append(byName[f.name], f)
	}
	var out []jsonField
	for _, name := range order {
		fs := byName[name]
		min := fs[0].depth
		for _, f := range fs {
			if f.depth < min {
				min = f.depth
			}
		}
		var top, tagged []jsonField
		for _, f := range fs {
			if f.depth == min {
				top = append(top, f)
				if f.tagged {
					tagged = append(tagged, f)
				}
			}
		}
		switch {
		case len(top) == 1:
			out = append(out, top[0])
		case len(tagged) == 1:
			out = append(out, tagged[0])
		}
	}
	return out
}

// object is the schema of a struct type, with the rules of oke's decoder
// (decode.go): a field is required unless its type is a pointer, its json
// tag says omitempty (or omitzero), or it is promoted through an embedded
// pointer; no other property is allowed (the decoder refuses unknown
// fields) unless the type decodes itself (selfDecoding: its UnmarshalJSON
// decides); the fields' validation tags (package internal/constraint)
// become keywords of their schemas.
func (g *schemaGen) object(st *types.Struct, selfDecoding bool) any {
	props := map[string]any{}
	var required []any
	for _, f := range fields(st) {
		var s any
		if f.asString {
			s = map[string]any{"type": "string"}
		} else {
			s = g.schema(f.typ)
		}
		s = g.withRules(s, f)
		if doc := g.docs[f.obj.Pos()]; doc != "" {
			if m, ok := s.(map[string]any); ok {
				c := make(map[string]any, len(m)+1)
				for k, v := range m {
					c[k] = v
				}
				c["description"] = doc
				s = c
			} else {
				s = map[string]any{"allOf": []any{s}, "description": doc}
			}
		}
		props[f.name] = s
		if fieldRequired(f) {
			required = append(required, f.name)
		}
	}
	out := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		out["required"] = required
	}
	if !selfDecoding {
		out["additionalProperties"] = false
	}
	return out
}

// fieldRequired is the decoder's rule for a required field.
func fieldRequired(f jsonField) bool {
	_, ptr := types.Unalias(f.typ).(*types.Pointer)
	return !f.omitempty && !f.viaPtr && !ptr
}

// fieldRules parses f's validation tags (nil when it has none).
func fieldRules(f jsonField) (*constraint.Rules, error) {
	k, item := kindOf(f.typ)
	if f.asString {
		k, item = constraint.Other, constraint.Other
	}
	return constraint.Parse(reflect.StructTag(f.tag), k, item)
}

// withRules merges f's validation tags into its schema s.
func (g *schemaGen) withRules(s any, f jsonField) any {
	r, err := fieldRules(f)
	if err != nil || r == nil { // err: a diagnostic (tagProblems)
		return s
	}
	m, ok := s.(map[string]any)
	if !ok {
		return s // a reference: kindOf says tags do not apply to it
	}
	c := make(map[string]any, len(m)+4)
	for k, v := range m {
		c[k] = v
	}
	for k, v := range r.Schema() {
		c[k] = v
	}
	if r.Items != nil {
		if items, ok := c["items"].(map[string]any); ok {
			ic := make(map[string]any, len(items)+4)
			for k, v := range items {
				ic[k] = v
			}
			for k, v := range r.Items.Schema() {
				ic[k] = v
			}
			c["items"] = ic
		}
	}
	return c
}

// kindOf is constraint.KindOf over go/types: the JSON kind of t's value as
// encoding/json decodes it (through pointers), and for a slice or array its
// items' kind.
func kindOf(t types.Type) (k, item constraint.Kind) {
	t = types.Unalias(t)
	for {
		p, ok := t.Underlying().(*types.Pointer)
		if !ok {
			break
		}
		t = types.Unalias(p.Elem())
	}
	if n, ok := t.(*types.Named); ok && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == "encoding/json" && n.Obj().Name() == "Number" {
		return constraint.Number, constraint.Other
	}
	if hasMethod(t, "UnmarshalJSON") || hasMethod(t, "UnmarshalText") {
		return constraint.Other, constraint.Other
	}
	switch u := t.Underlying().(type) {
	case *types.Basic:
		switch {
		case u.Info()&types.IsString != 0:
			return constraint.String, constraint.Other
		case u.Info()&types.IsBoolean != 0:
			return constraint.Bool, constraint.Other
		case u.Info()&types.IsInteger != 0:
			return constraint.Integer, constraint.Other
		case u.Info()&types.IsFloat != 0:
			return constraint.Number, constraint.Other
		}
	case *types.Slice:
		if b, ok := u.Elem().Underlying().(*types.Basic); ok && b.Kind() == types.Byte && !hasMethod(u.Elem(), "UnmarshalJSON") && !hasMethod(u.Elem(), "UnmarshalText") {
			return constraint.Other, constraint.Other
		}
		it, _ := kindOf(u.Elem())
		return constraint.Array, it
	case *types.Array:
		it, _ := kindOf(u.Elem())
		return constraint.Array, it
	}
	return constraint.Other, constraint.Other
}

// tagProblems returns the fields with bad validation tags that a value of
// type t decodes through, each once, in a stable order.
func (g *schemaGen) tagProblems(t types.Type) []tagProblem {
	var out []tagProblem
	seen := map[types.Type]bool{}
	var walk func(t types.Type)
	walk = func(t types.Type) {
		t = types.Unalias(t)
		if t == nil || seen[t] {
			return
		}
		seen[t] = true
		switch u := t.Underlying().(type) {
		case *types.Pointer:
			walk(u.Elem())
		case *types.Slice:
			walk(u.Elem())
		case *types.Array:
			walk(u.Elem())
		case *types.Map:
			walk(u.Elem())
		case *types.Struct:
			for _, f := range fields(u) {
				if _, err := fieldRules(f); err != nil {
					out = append(out, tagProblem{typ: t, field: f, err: err})
				}
				walk(f.typ)
			}
		}
	}
	walk(t)
	return out
}

type tagProblem struct {
	typ   types.Type
	field jsonField
	err   error
}

// param is a path or query parameter filled from an input field.
type param struct {
	name   string
	schema any
	doc    string
}

// paramFields returns the input fields that URL parameters can fill
// (urlparams.Fields, oke's decoder's rule), with their schemas and docs.
func (g *schemaGen) paramFields(t types.Type) []param {
	var out []param
	for _, f := range urlparams.Fields(t) {
		s := basicSchema(f.Basic).(map[string]any)
		k, _ := kindOf(f.Var.Type())
		if r, err := constraint.Parse(reflect.StructTag(f.Tag), k, constraint.Other); err == nil && r != nil {
			for key, v := range r.Schema() {
				s[key] = v
			}
		}
		out = append(out, param{name: f.Name, schema: s, doc: g.docs[f.Var.Pos()]})
	}
	return out
}
