// Package urlparams says which fields of a flow's input oke fills from the
// URL (path and, for GET, query parameters): the rule of oke's decoder
// (decode.go, paramFields), over go/types, for the OpenAPI document
// (package extract) and the generated client (extract/clientgen) alike.
package urlparams

import (
	"go/types"
	"reflect"
	"strings"
)

// Field is an input field a URL parameter fills.
type Field struct {
	Name  string       // the parameter's name: the field's JSON name
	Var   *types.Var   // the Go field
	Basic *types.Basic // its scalar kind (through one pointer)
	Tag   string       // its whole struct tag (for validation tags)
}

// Fields returns t's fields that URL parameters fill: the exported
// top-level fields of a struct whose type (or the type a pointer points
// to) is a boolean, an integer, a float or a string, by their JSON names;
// json:"-" fields are left out. Anything that is not a struct has none.
func Fields(t types.Type) []Field {
	if t == nil {
		return nil
	}
	st, ok := t.Underlying().(*types.Struct)
	if !ok {
		return nil
	}
	var out []Field
	for i := 0; i < st.NumFields(); i++ {
		f := st.Field(i)
		if !f.Exported() {
			continue
		}
		name := f.Name()
		if tag, ok := reflect.StructTag(st.Tag(i)).Lookup("json"); ok {
			n, _, _ := strings.Cut(tag, ",")
			if n == "-" {
				continue
			}
			if n != "" {
				name = n
			}
		}
		ft := types.Unalias(f.Type())
		if p, ok := ft.Underlying().(*types.Pointer); ok {
			ft = p.Elem()
		}
		b, ok := ft.Underlying().(*types.Basic)
		if !ok || b.Info()&(types.IsBoolean|types.IsInteger|types.IsFloat|types.IsString) == 0 {
			continue
		}
		out = append(out, Field{Name: name, Var: f, Basic: b, Tag: st.Tag(i)})
	}
	return out
}
