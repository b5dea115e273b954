package extract_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/okengine/oke/extract"
	"github.com/okengine/oke/internal/modtest"
)

// shopSrc is a user's package: a flow whose effects come from a helper and
// whose function calls an interface method implemented in the package.
const shopSrc = `package shop

import (
	"context"
	"database/sql"

	"github.com/okengine/oke"
)

type OrderIn struct {
	Item string ` + "`json:\"item\"`" + `
}

type Order struct {
	ID string ` + "`json:\"id\"`" + `
}

type notifier interface {
	Notify(ctx context.Context, fx *oke.Fx, msg string) error
}

type mailer struct{}

func (mailer) Notify(ctx context.Context, fx *oke.Fx, msg string) error {
	return fx.Emit(ctx, "mail", msg)
}

func Register(app *oke.App, db *sql.DB) {
	var n notifier = mailer{}
	order := oke.NewFlow("shop.order", oke.Options{}, func(ctx context.Context, in OrderIn, fx *oke.Fx) (oke.Response[Order], error) {
		if err := n.Notify(ctx, fx, in.Item); err != nil {
			return oke.Response[Order]{}, err
		}
		return save(ctx, fx, db, in)
	})
	app.Handle(oke.POST("/orders"), order)
	lookup := oke.NewFlow("shop.lookup", oke.Options{}, func(ctx context.Context, in OrderIn, fx *oke.Fx) (oke.Response[Order], error) {
		return oke.OK(Order{ID: in.Item}), nil
	})
	app.Handle(oke.POST("/lookup"), lookup)
}

func save(ctx context.Context, fx *oke.Fx, db *sql.DB, in OrderIn) (oke.Response[Order], error) {
	var id string
	if err := fx.Store(db).QueryRow(ctx, "SELECT id FROM orders WHERE item = $1", in.Item).Scan(&id); err != nil {
		return oke.Response[Order]{}, err
	}
	return oke.OK(Order{ID: id}), nil
}
`

// shopFormatted is shopSrc with only its formatting and comments changed:
// lines moved, a call split over lines, comments added.
var shopFormatted = strings.NewReplacer(
	"type mailer struct{}\n", "// mailer sends mail.\n//\n// (A comment only.)\ntype mailer struct{}\n\n\n",
	"\treturn fx.Emit(ctx, \"mail\", msg)", "\t// Through fx, so oke knows.\n\treturn fx.Emit(\n\t\tctx,\n\t\t\"mail\",\n\t\tmsg,\n\t)",
	"\tvar id string\n", "\tvar id string // the order's\n\n",
).Replace(shopSrc)

// A contract is stale when the code it was inferred from changed, and
// fresh when only formatting or comments did. The shop is extracted once;
// each row copies its files into a module of its own, changes the source
// and checks them against the changed code.
func TestCheckStaleContract(t *testing.T) {
	base := modtest.New(t, map[string]string{"shop/shop.go": shopSrc})
	before, err := extract.Run(extract.Config{Dir: base, Patterns: []string{"./shop"}})
	if err != nil {
		t.Fatal(err)
	}
	written, err := before.Files(base)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		change func(string) string
		stale  []string // the stale flows, and for each what must be named
		what   []string
	}{
		{name: "unchanged", change: func(s string) string { return s }},
		{name: "formatting and comments only", change: func(string) string { return shopFormatted }},
		{name: "a helper's statement changed (same effects)", stale: []string{"shop.order"}, what: []string{"oke.contract.json: digest (the code changed)", "shop/oke_contract_gen.go: digest (the code changed)"},
			change: func(s string) string { return strings.Replace(s, "WHERE item = $1", "WHERE name = $1", 1) }},
		{name: "a helper now writes", stale: []string{"shop.order"}, what: []string{"digest (the code changed), effects, why"},
			change: func(s string) string {
				return strings.Replace(s, "SELECT id FROM orders WHERE item = $1", "INSERT INTO orders (item) VALUES ($1) RETURNING id", 1)
			}},
		{name: "an interface method's implementation changed", stale: []string{"shop.order"}, what: []string{"digest (the code changed)"},
			change: func(s string) string {
				return strings.Replace(s, `fx.Emit(ctx, "mail", msg)`, `fx.Emit(ctx, "mail", "to: "+msg)`, 1)
			}},
		{name: "a binding changed", stale: []string{"shop.lookup"}, what: []string{"digest (the code changed), bindings", "openapi.json: operation shop.lookup"},
			change: func(s string) string { return strings.Replace(s, `oke.POST("/lookup")`, `oke.PUT("/lookup")`, 1) }},
		{name: "every flow of the package removed", stale: []string{"", "", "shop.lookup", "shop.order"}, // openapi.json and the generated file
			what:   []string{`shop/oke_contract_gen.go:1:1: oke_contract_gen.go registers flows its package no longer declares ("shop.lookup", "shop.order")`, "fix: delete it"},
			change: func(string) string { return "package shop\n" }},
		{name: "a flow renamed", stale: []string{"shop.find", "shop.lookup"}, what: []string{"not in it", "the code no longer does"},
			change: func(s string) string { return strings.Replace(s, `"shop.lookup"`, `"shop.find"`, 1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			files := map[string]string{"shop/shop.go": tc.change(shopSrc)}
			for name, b := range written {
				rel, _ := filepath.Rel(base, name)
				files[filepath.ToSlash(rel)] = string(b)
			}
			dir := modtest.New(t, files)
			after, err := extract.Run(extract.Config{Dir: dir, Patterns: []string{"./shop"}})
			if err != nil {
				t.Fatal(err)
			}
			stale, err := after.Check(dir)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			var msgs strings.Builder
			for _, d := range stale {
				got = append(got, d.Flow)
				msgs.WriteString(d.String() + "\n")
				if d.Rule != extract.RuleStale {
					t.Errorf("rule %q, want %q", d.Rule, extract.RuleStale)
				}
				if !strings.Contains(d.Message, "fix: run go generate (or oke extract -o "+dir+" ./shop) and commit the result") &&
					!strings.HasSuffix(d.Message, "fix: delete it and commit the result") {
					t.Errorf("no fix in %s", d)
				}
			}
			slices.Sort(got)
			if strings.Join(got, " ") != strings.Join(tc.stale, " ") {
				t.Fatalf("stale flows %q, want %q:\n%s", got, tc.stale, msgs.String())
			}
			for _, w := range tc.what {
				if !strings.Contains(msgs.String(), w) {
					t.Errorf("the diagnostics do not say %q:\n%s", w, msgs.String())
				}
			}
			if len(tc.stale) == 0 {
				for i, f := range before.Contract.Flows {
					if g := after.Contract.Flows[i]; g.Digest != f.Digest {
						t.Errorf("flow %s: digest %s, was %s", f.Name, g.Digest, f.Digest)
					}
				}
			}
		})
	}
}

// Every flow's digest is "sha256:" and 64 hex digits, in the contract and
// in the generated Go file.
func TestDigestIsRecorded(t *testing.T) {
	res := runIn(t, "", "./testdata/flows")
	for _, f := range res.Contract.Flows {
		d, ok := strings.CutPrefix(f.Digest, extract.DigestPrefix)
		if !ok || len(d) != 64 || strings.Trim(d, "0123456789abcdef") != "" {
			t.Errorf("flow %s: digest %q", f.Name, f.Digest)
		}
	}
}
