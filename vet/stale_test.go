package vet_test

import (
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/checker"
	"golang.org/x/tools/go/packages"

	"github.com/okengine/oke/extract"
	"github.com/okengine/oke/internal/modtest"
	"github.com/okengine/oke/vet"
)

const staleShop = `package shop

//go:generate go run github.com/okengine/oke/cmd/oke extract -o .. .

import (
	"context"
	"database/sql"

	"github.com/okengine/oke"
)

type In struct {
	Item string ` + "`json:\"item\"`" + `
}

func Register(app *oke.App, db *sql.DB) {
	app.Handle(oke.POST("/orders"), oke.NewFlow("shop.order", oke.Options{}, func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[In], error) {
		return save(ctx, fx, db, in)
	}))
	// ANOTHER
}

func save(ctx context.Context, fx *oke.Fx, db *sql.DB, in In) (oke.Response[In], error) {
	_, err := fx.Store(db).Exec(ctx, "UPDATE orders SET seen = true WHERE item = $1", in.Item)
	return oke.OK(in), err
}
`

// stalecontract reports a checked-in oke_contract_gen.go whose flow's code
// changed since extract wrote it, and a flow it lacks; a change of
// formatting or comments only is not reported. The shop is extracted once;
// each row gets a module of its own with the generated file and a changed
// source.
func TestStaleContract(t *testing.T) {
	base := modtest.New(t, map[string]string{"shop/shop.go": staleShop})
	res, err := extract.Run(extract.Config{Dir: filepath.Join(base, "shop"), Patterns: []string{"."}})
	if err != nil {
		t.Fatal(err)
	}
	files, err := res.Files(base)
	if err != nil {
		t.Fatal(err)
	}
	gen := string(files[filepath.Join(base, "shop", extract.GoFile)])
	if !strings.Contains(gen, "Digest:") {
		t.Fatalf("the generated file records no digest:\n%s", gen)
	}
	for _, tc := range []struct {
		name   string
		change func(string) string
		want   []string // the diagnostics, each as FILE:LINE:COL and a part of the message
	}{
		{"unchanged", func(s string) string { return s }, nil},
		{"formatting and comments only", func(s string) string {
			return strings.Replace(s, "func save(", "// save marks an order seen.\n\n\nfunc save(\n", 1)
		}, nil},
		{"the code a flow reaches changed", func(s string) string {
			return strings.Replace(s, "seen = true", "seen = false", 1)
		}, []string{`shop.go:17:34: flow "shop.order": its contract in oke_contract_gen.go is stale: the code it was inferred from changed`}},
		{"a flow the file lacks", func(s string) string {
			return strings.Replace(s, "// ANOTHER", `app.Handle(oke.POST("/more"), oke.NewFlow("shop.more", oke.Options{}, func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[In], error) {
		return oke.OK(in), nil
	}))`, 1)
		}, []string{`shop.go:20:32: flow "shop.more" is not in oke_contract_gen.go`}},
		{"a flow the code lost", func(s string) string {
			return strings.Replace(s, `"shop.order"`, `"shop.renamed"`, 1)
		}, []string{`oke_contract_gen.go:14:4: flow "shop.order" is in oke_contract_gen.go, but oke extract no longer finds it`, `shop.go:17:34: flow "shop.renamed" is not in oke_contract_gen.go`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := modtest.New(t, map[string]string{"shop/shop.go": tc.change(staleShop), "shop/" + extract.GoFile: gen})
			got := analyze(t, filepath.Join(dir, "shop"))
			if len(got) != len(tc.want) {
				t.Fatalf("%d diagnostics, want %d:\n%s", len(got), len(tc.want), strings.Join(got, "\n"))
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) || !strings.Contains(got[i], "fix: run go generate in shop (//go:generate go run github.com/okengine/oke/cmd/oke extract -o .. .) and commit the result") {
					t.Errorf("diagnostic %d:\n%s\nwant it to contain:\n%s", i, got[i], w)
				}
			}
		})
	}
}

// analyze runs stalecontract on the package in dir, as oke vet does, and
// returns its diagnostics as FILE:LINE:COL: message (the file's base
// name), sorted.
func analyze(t *testing.T, dir string) []string {
	t.Helper()
	mode := packages.NeedName | packages.NeedFiles | packages.NeedCompiledGoFiles | packages.NeedImports |
		packages.NeedTypes | packages.NeedTypesSizes | packages.NeedSyntax | packages.NeedTypesInfo | packages.NeedModule
	pkgs, err := packages.Load(&packages.Config{Mode: mode, Dir: dir}, ".")
	if err != nil {
		t.Fatal(err)
	}
	if packages.PrintErrors(pkgs) > 0 {
		t.Fatal("the package does not load")
	}
	g, err := checker.Analyze([]*analysis.Analyzer{vet.StaleContract}, pkgs, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, act := range g.Roots {
		if act.Err != nil {
			t.Fatal(act.Err)
		}
		for _, d := range act.Diagnostics {
			p := act.Package.Fset.Position(d.Pos)
			out = append(out, filepath.Base(p.Filename)+":"+strconv.Itoa(p.Line)+":"+strconv.Itoa(p.Column)+": "+d.Message)
		}
	}
	slices.Sort(out)
	return out
}
