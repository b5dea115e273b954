package clientgen

import (
	"fmt"
	"go/types"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/okengine/oke/extract/internal/urlparams"
)

// This file writes the Go types of the generated methods: a flow's own
// input and output types where the generated package may import them, and
// otherwise copies of them — structs with the same fields and json tags, so
// that they encode and decode the same JSON.

// typeDecl is a copied type's declaration.
type typeDecl struct {
	name string
	src  string // doc comment and declaration
}

// importName returns the name the file uses for the package at path
// (whose own name is name), adding the import.
func (g *gen) importName(path, name string) string {
	if n, ok := g.imports[path]; ok {
		return n
	}
	n := name
	for i := 2; g.taken[n]; i++ {
		n = name + strconv.Itoa(i)
	}
	g.taken[n] = true
	g.imports[path] = n
	return n
}

// typ returns the Go type expression of t in the generated file.
func (g *gen) typ(t types.Type) string {
	switch t := types.Unalias(t).(type) {
	case *types.Named:
		return g.named(t)
	case *types.Basic:
		if t.Kind() == types.UnsafePointer {
			return g.importName("unsafe", "unsafe") + ".Pointer"
		}
		return t.Name()
	case *types.Pointer:
		return "*" + g.typ(t.Elem())
	case *types.Slice:
		return "[]" + g.typ(t.Elem())
	case *types.Array:
		return fmt.Sprintf("[%d]%s", t.Len(), g.typ(t.Elem()))
	case *types.Map:
		return "map[" + g.typ(t.Key()) + "]" + g.typ(t.Elem())
	case *types.Struct:
		return g.structType(t, "")
	}
	// An interface, a channel, a function or a type parameter: as JSON,
	// anything (encoding/json cannot encode the last three anyway).
	return "any"
}

// named is a named type: imported when it may be, else copied.
func (g *gen) named(t *types.Named) string {
	obj := t.Obj()
	if obj.Pkg() == nil {
		return obj.Name() // error, comparable
	}
	if why := g.notImportable(obj); why == "" {
		if obj.Pkg().Path() == g.cfg.ImportPath {
			g.fail(fmt.Errorf("type %s is declared in %s, the package being generated; generate the client into a package of its own (another -o)", obj.Name(), g.cfg.ImportPath))
		}
		s := g.importName(obj.Pkg().Path(), obj.Pkg().Name()) + "." + obj.Name()
		if args := t.TypeArgs(); args.Len() > 0 {
			parts := make([]string, args.Len())
			for i := range parts {
				parts[i] = g.typ(args.At(i))
			}
			s += "[" + strings.Join(parts, ", ") + "]"
		}
		return s
	}
	return g.copyNamed(t)
}

// notImportable says why the generated package cannot name obj, a named
// type ("" when it can).
func (g *gen) notImportable(obj *types.TypeName) string {
	pkg := obj.Pkg()
	path := pkg.Path()
	switch {
	case !obj.Exported():
		return "it is not exported"
	case obj.Parent() != pkg.Scope():
		return "it is declared inside a function"
	case pkg.Name() == "main":
		return "package main (" + path + ") cannot be imported"
	case g.cfg.standalone() && !g.std(path):
		return "the client stands alone"
	}
	if parent, ok := internalParent(path, g.cfg.ImportPath); !ok {
		return fmt.Sprintf("%s is internal to %s", path, parent)
	}
	return ""
}

// std reports whether path is a standard library package: no dot in its
// first element, and not the main module's.
func (g *gen) std(path string) bool {
	if m := g.modPath; m != "" && (path == m || strings.HasPrefix(path, m+"/")) {
		return false
	}
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

// internalParent applies Go's rule for internal packages: path, with an
// element "internal", may be imported only from the tree rooted at the
// parent of that element. It returns the parent that forbids importer.
func internalParent(path, importer string) (string, bool) {
	elems := strings.Split(path, "/")
	for i, e := range elems {
		if e != "internal" {
			continue
		}
		parent := strings.Join(elems[:i], "/")
		if parent == "" || importer != parent && !strings.HasPrefix(importer, parent+"/") {
			if parent == "" {
				parent = "the standard library"
			}
			return parent, false
		}
	}
	return "", true
}

// copyNamed declares a copy of t in the generated file and returns its
// name. Types encoding/json writes with their own methods become what
// they write: json.RawMessage for a MarshalJSON, string for a MarshalText.
func (g *gen) copyNamed(t *types.Named) string {
	key := types.TypeString(t, nil)
	if n, ok := g.copied[key]; ok {
		return n
	}
	if hasMethod(t, "MarshalJSON") {
		return g.importName("encoding/json", "json") + ".RawMessage"
	}
	if hasMethod(t, "MarshalText") {
		return "string"
	}
	if _, ok := t.Underlying().(*types.Interface); ok {
		return "any"
	}
	name := g.typeName(t)
	g.copied[key] = name // before the body: a type may refer to itself
	var body string
	if st, ok := t.Underlying().(*types.Struct); ok {
		body = g.structType(st, name)
	} else {
		body = g.typ(t.Underlying())
	}
	obj := t.Obj()
	short := types.TypeString(t, func(p *types.Package) string { return p.Name() })
	doc := fmt.Sprintf("%s is a copy of %s, with the same JSON: %s.", name, short, g.notImportable(obj))
	if g.cfg.standalone() {
		doc = fmt.Sprintf("%s is a copy of %s, with the same JSON.", name, short)
	}
	g.decls = append(g.decls, typeDecl{name: name, src: comment(doc, "") + "type " + name + " " + body + "\n"})
	return name
}

// typeName picks the name of a copied type: the type's own name
// (exported, with its type arguments), else qualified by its package,
// else numbered.
func (g *gen) typeName(t *types.Named) string {
	base := goName(t.Obj().Name())
	if args := t.TypeArgs(); args != nil {
		for i := 0; i < args.Len(); i++ {
			base += argName(args.At(i))
		}
	}
	cands := []string{base, goName(t.Obj().Pkg().Name()) + base}
	for _, c := range cands {
		if !g.taken[c] {
			g.taken[c] = true
			return c
		}
	}
	for i := 2; ; i++ {
		c := cands[1] + strconv.Itoa(i)
		if !g.taken[c] {
			g.taken[c] = true
			return c
		}
	}
}

// argName is a type argument's part of a copied generic type's name.
func argName(t types.Type) string {
	switch t := types.Unalias(t).(type) {
	case *types.Named:
		return goName(t.Obj().Name())
	case *types.Basic:
		return goName(t.Name())
	case *types.Pointer:
		return argName(t.Elem())
	case *types.Slice:
		return argName(t.Elem()) + "s"
	case *types.Map:
		return "MapOf" + argName(t.Elem())
	}
	return "T"
}

// structType writes a struct with the fields encoding/json sees in st, by
// the same names and json tags. self is the copied type's name ("" for an
// anonymous struct), for errors.
func (g *gen) structType(st *types.Struct, self string) string {
	if st.NumFields() == 0 {
		return "struct{}"
	}
	var b strings.Builder
	b.WriteString("struct {\n")
	names := map[string]bool{}
	add := func(name, line string) {
		if names[name] {
			g.fail(fmt.Errorf("cannot copy %s: two of its fields would be named %s; copy it by hand, or make it importable (export it from a package the client may import)", self, name))
		}
		names[name] = true
		b.WriteString("\t" + line + "\n")
	}
	for i := 0; i < st.NumFields(); i++ {
		f := st.Field(i)
		tag, hasTag := reflect.StructTag(st.Tag(i)).Lookup("json")
		if tag == "-" {
			continue
		}
		jsonName, _, _ := strings.Cut(tag, ",")
		ft := f.Type()
		switch ft.Underlying().(type) {
		case *types.Chan, *types.Signature:
			continue // encoding/json cannot encode them
		}
		tagSrc := ""
		if hasTag {
			tagSrc = " " + structTag(tag)
		}
		if f.Embedded() {
			et := types.Unalias(ft)
			if p, ok := et.(*types.Pointer); ok {
				et = types.Unalias(p.Elem())
			}
			_, isStruct := et.Underlying().(*types.Struct)
			if !f.Exported() && !isStruct {
				continue // encoding/json ignores it
			}
			if jsonName == "" && isStruct && !g.special(et) {
				// Promoted fields: embed the struct (imported or copied).
				if r := g.typ(ft); embeddable(r) {
					add(strings.TrimPrefix(lastDot(r), "*"), r+tagSrc)
					continue
				}
			}
			// A field of its own, under the name JSON gives it.
			if jsonName == "" {
				jsonName = f.Name()
			}
			name := goName(f.Name())
			add(name, name+" "+g.typ(ft)+" "+structTag(jsonName+strings.TrimPrefix(tag, strings.SplitN(tag, ",", 2)[0])))
			continue
		}
		if !f.Exported() {
			continue
		}
		add(f.Name(), f.Name()+" "+g.typ(ft)+tagSrc)
	}
	b.WriteString("}")
	return b.String()
}

// special reports whether t is copied as what its own JSON methods write
// (json.RawMessage or string) rather than as a struct.
func (g *gen) special(t types.Type) bool {
	n, ok := types.Unalias(t).(*types.Named)
	return ok && n.Obj().Pkg() != nil && g.notImportable(n.Obj()) != "" &&
		(hasMethod(n, "MarshalJSON") || hasMethod(n, "MarshalText"))
}

// embeddable reports whether a type expression may be embedded: T, *T,
// pkg.T (with or without type arguments).
func embeddable(r string) bool {
	r = strings.TrimPrefix(r, "*")
	if i := strings.IndexByte(r, '['); i >= 0 {
		r = r[:i]
	}
	for _, part := range strings.Split(r, ".") {
		if !isIdent(part) {
			return false
		}
	}
	return r != "" && r != "any" && r != "string"
}

// lastDot is the type name of an embedded type expression: the field's
// name.
func lastDot(r string) string {
	if i := strings.IndexByte(r, '['); i >= 0 {
		r = r[:i]
	}
	return r[strings.LastIndexByte(r, '.')+1:]
}

func structTag(json string) string {
	t := "json:" + strconv.Quote(json)
	if strings.Contains(t, "`") {
		return strconv.Quote(t)
	}
	return "`" + t + "`"
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

// param is an input field oke fills from the URL: an exported top-level
// field of a scalar kind (or a pointer to one), by its JSON name
// (oke's paramFields).
type param struct {
	json   string // the name in the path or query
	field  string // the Go field
	str    bool   // a plain string: client.PathParam takes it as it is
	scalar types.Type
}

func paramFields(t types.Type) []param {
	var out []param
	for _, f := range urlparams.Fields(t) {
		bt, ok := types.Unalias(f.Var.Type()).(*types.Basic)
		plain := ok && bt.Kind() == types.String
		out = append(out, param{json: f.Name, field: f.Var.Name(), str: plain, scalar: f.Var.Type()})
	}
	return out
}

// sortedDecls returns the copied types by name.
func (g *gen) sortedDecls() []typeDecl {
	out := append([]typeDecl(nil), g.decls...)
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}
