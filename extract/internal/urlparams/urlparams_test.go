package urlparams

import (
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"slices"
	"testing"
)

// TestFields: the fields a URL fills are the exported scalar ones (through
// one pointer), by JSON name, as oke's decoder fills them.
func TestFields(t *testing.T) {
	const src = `package p
type Str string
type In struct {
	ID       string  ` + "`json:\"id\"`" + `
	Limit    *int    ` + "`json:\"limit,omitempty\"`" + `
	Ratio    float64
	On       bool    ` + "`json:\",omitempty\"`" + `
	Kind     Str     ` + "`json:\"kind\"`" + `
	Skip     string  ` + "`json:\"-\"`" + `
	Tags     []string
	Nested   struct{ A int }
	hidden   int
}
type NotStruct int
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	pkg, err := (&types.Config{Importer: importer.Default()}).Check("p", fset, []*ast.File{f}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, fl := range Fields(pkg.Scope().Lookup("In").Type()) {
		got = append(got, fl.Name+"="+fl.Var.Name()+":"+fl.Basic.Name())
	}
	want := []string{"id=ID:string", "limit=Limit:int", "Ratio=Ratio:float64", "On=On:bool", "kind=Kind:string"}
	if !slices.Equal(got, want) {
		t.Errorf("Fields(In) = %v, want %v", got, want)
	}
	if fs := Fields(pkg.Scope().Lookup("NotStruct").Type()); fs != nil {
		t.Errorf("Fields(NotStruct) = %v, want none", fs)
	}
	if fs := Fields(nil); fs != nil {
		t.Errorf("Fields(nil) = %v, want none", fs)
	}
}
