package extract_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/okengine/oke/extract"
)

var update = flag.Bool("update", false, "rewrite the golden files: the demo's (examples/payments/oke.contract.json, openapi.json, app/oke_contract_gen.go) and the fixture's (testdata/golden)")

// demoFixes are the changes the demo needs to pass its own extract. While
// the demo still has the old text, the golden test applies the change as
// an overlay (the same number of lines, so every position stays), and
// TestDemoAsWritten checks that the demo as written breaks exactly the
// rule the change fixes. Once the demo is fixed the old text is gone and
// the fix is not applied: delete it here then.
var demoFixes = []struct {
	file, old, new string
	broken         string // the diagnostic of the demo as written
}{{
	// payments.list builds its ORDER BY from the dialect at run time: a
	// statement extract cannot classify counts as a write, which the
	// declared Effects [read] leave out. One constant statement per
	// dialect says what it does.
	file: "examples/payments/app/charges.go",
	old: "\t\trows, err := fx.Store(s.rdb).Query(ctx,\n" +
		"\t\t\t`SELECT id, amount, currency, created_at FROM charges ORDER BY `+s.dialect.insertOrder+` DESC LIMIT $1`, in.Limit)\n",
	new: "\t\tq := `SELECT id, amount, currency, created_at FROM charges ORDER BY rowid DESC LIMIT $1`; if s.dialect.insertOrder == \"seq\" { q = `SELECT id, amount, currency, created_at FROM charges ORDER BY seq DESC LIMIT $1` }\n" +
		"\t\trows, err := fx.Store(s.rdb).Query(ctx, q, in.Limit)\n",
	broken: `examples/payments/app/charges.go:107:9: flow "payments.list": Options.Effects declares [read] but the flow also has write (examples/payments/app/charges.go:111 fx.Store(s.rdb).Query with SQL computed at run time (counts as a write)); make the statement a constant string (one constant per variant, e.g. a const per SQL dialect) so that extract can classify it, or add oke.EffectWrite to Effects, or drop Effects and let oke extract infer them`,
}}

// demoOverlay returns the overlay of the fixes that still apply, and their
// broken-rule diagnostics.
func demoOverlay(t *testing.T) (map[string][]byte, []string) {
	t.Helper()
	root := moduleRoot(t)
	overlay := map[string][]byte{}
	var broken []string
	for _, fix := range demoFixes {
		name := filepath.Join(root, fix.file)
		src, ok := overlay[name]
		if !ok {
			var err error
			if src, err = os.ReadFile(name); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Contains(src, []byte(fix.old)) {
			continue // fixed in the demo
		}
		overlay[name] = bytes.Replace(src, []byte(fix.old), []byte(fix.new), 1)
		broken = append(broken, fix.broken)
	}
	return overlay, broken
}

func demoDir(t *testing.T) string { return filepath.Join(moduleRoot(t), "examples", "payments") }

// The demo's contract, OpenAPI document and generated Go file are checked
// in; extracting the demo gives them back byte for byte.
func TestDemoGolden(t *testing.T) {
	overlay, _ := demoOverlay(t)
	res, err := extract.Run(extract.Config{Dir: demoDir(t), Patterns: []string{"./..."}, Overlay: overlay})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Diagnostics) > 0 {
		t.Fatalf("the demo (with demoFixes) breaks rules:\n%v", res.Diagnostics)
	}
	checkGolden(t, res, demoDir(t), 3)
}

// runDemoAsWritten extracts the demo without demoFixes, once.
func runDemoAsWritten(t *testing.T) *extract.Result {
	t.Helper()
	return runIn(t, demoDir(t), "./...")
}

// The demo as written breaks exactly the rules demoFixes fix.
func TestDemoAsWritten(t *testing.T) {
	_, want := demoOverlay(t)
	res := runDemoAsWritten(t)
	var got []string
	for _, d := range res.Diagnostics {
		got = append(got, d.String())
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the demo breaks:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// checkGolden compares (or, with -update, writes) the n files extract
// writes for res with outDir as -o.
func checkGolden(t *testing.T, res *extract.Result, outDir string, n int) {
	t.Helper()
	if *update {
		written, err := res.Write(outDir)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", strings.Join(written, ", "))
	}
	files, err := res.Files(outDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != n {
		t.Errorf("%d files, want %d", len(files), n)
	}
	for name, want := range files {
		got, err := os.ReadFile(name)
		if err != nil {
			t.Errorf("%v (run go test ./extract -run %s -update)", err, t.Name())
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from what extract writes (run go test ./extract -run %s -update):\n%s", name, t.Name(), firstDiff(got, want))
		}
	}
}

// firstDiff shows the first line that differs.
func firstDiff(got, want []byte) string {
	g := strings.Split(string(got), "\n")
	w := strings.Split(string(want), "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var a, b string
		if i < len(g) {
			a = g[i]
		}
		if i < len(w) {
			b = w[i]
		}
		if a != b {
			return fmt.Sprintf("line %d:\n  file:    %s\n  extract: %s", i+1, a, b)
		}
	}
	return "(same lines)"
}

// The fixture's contract and OpenAPI document are golden too; a change to
// a flow that changes its effects changes them.
func TestFixtureGolden(t *testing.T) {
	res := runIn(t, "", "./testdata/flows")
	checkFixtureGolden(t, res)
}

// Extracting the same code twice gives the same bytes.
func TestOutputIsDeterministic(t *testing.T) {
	a := runIn(t, "", "./testdata/flows")
	b, err := extract.Run(extract.Config{Patterns: []string{"./testdata/flows"}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	fa, err := a.Files(dir)
	if err != nil {
		t.Fatal(err)
	}
	fb, err := b.Files(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(fa) != len(fb) || len(fa) != 3 {
		t.Fatalf("%d and %d files", len(fa), len(fb))
	}
	for name, x := range fa {
		if !bytes.Equal(x, fb[name]) {
			t.Errorf("%s differs between two runs:\n%s", name, firstDiff(x, fb[name]))
		}
	}
}

// fixtureFiles returns the fixture's contract and OpenAPI document.
func fixtureFiles(t *testing.T, res *extract.Result) map[string][]byte {
	t.Helper()
	return map[string][]byte{
		"testdata/golden/flows.contract.json": res.ContractJSON(),
		"testdata/golden/flows.openapi.json":  res.OpenAPIJSON(),
	}
}

func checkFixtureGolden(t *testing.T, res *extract.Result) {
	t.Helper()
	for name, want := range fixtureFiles(t, res) {
		if *update {
			if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(name, want, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(name)
		if err != nil {
			t.Fatalf("%v (run go test ./extract -run %s -update)", err, t.Name())
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs (run go test ./extract -run %s -update):\n%s", name, t.Name(), firstDiff(got, want))
		}
	}
}

// Editing a flow so that it writes (here, fixture.readOnly's SELECT becomes
// an INSERT, through an overlay) changes the golden contract: the flow's
// effects, why, honored binding and claim — and nothing else.
func TestGoldenChangesWhenEffectsChange(t *testing.T) {
	name, err := filepath.Abs("testdata/flows/flows.go")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	const old = "`SELECT count(*) FROM items WHERE id = $1`"
	if !bytes.Contains(src, []byte(old)) {
		t.Fatalf("%s no longer holds %s", name, old)
	}
	edited := bytes.Replace(src, []byte(old), []byte("`INSERT INTO seen (id) VALUES ($1) RETURNING 1`"), 1)
	res, err := extract.Run(extract.Config{Patterns: []string{"./testdata/flows"}, Overlay: map[string][]byte{name: edited}})
	if err != nil {
		t.Fatal(err)
	}
	golden, err := os.ReadFile("testdata/golden/flows.contract.json")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(golden, res.ContractJSON()) {
		t.Fatal("the contract did not change")
	}
	f := flowNamed(t, res, "fixture.readOnly")
	if fmt.Sprint(f.Effects) != "[write]" || !f.Bindings[0].Honored || f.Idempotency.Claim != "first" ||
		f.Why["write"][0] != "extract/testdata/flows/flows.go:112 fx.Store(db).QueryRow INSERT INTO seen (id) VALUES ($1) RETURNING 1" {
		t.Errorf("fixture.readOnly after the edit: %s", jsonString(f))
	}
	before := runIn(t, "", "./testdata/flows")
	for _, g := range before.Contract.Flows {
		if g.Name == f.Name {
			continue
		}
		if jsonString(g) != jsonString(flowNamed(t, res, g.Name)) {
			t.Errorf("flow %s changed too", g.Name)
		}
	}
}

// What payments.charge needs to be TxOnly (so that App.Start can hold its
// key's claim in its transaction): constant options, and no effect but
// its INSERT through fx.Tx. Applied here as an overlay, as a proposal for
// the demo; the demo as written is neither.
func TestDemoChargeTxOnlyProposal(t *testing.T) {
	name := filepath.Join(moduleRoot(t), "examples/payments/app/charges.go")
	src, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	overlay, _ := demoOverlay(t)
	if o, ok := overlay[name]; ok {
		src = o
	}
	for _, r := range []struct{ old, new string }{
		// constant options: one flow, Required
		{"\tmode := oke.Idempotency{Required: true, DeferClaim: s.cfg.DeferClaim, ClaimInTx: s.cfg.ClaimInTx}\n\tif s.cfg.Unprotected {\n\t\tmode = oke.Off\n\t}\n", "\tmode := oke.Required\n"},
		// no emit after the INSERT (an outbox row in the transaction would do as well)
		{"\t\tif err := fx.Emit(ctx, \"charge.created\", c); err != nil {\n\t\t\treturn oke.Response[Charge]{}, err\n\t\t}\n", ""},
	} {
		if !bytes.Contains(src, []byte(r.old)) {
			t.Fatalf("charges.go changed: update this proposal (%q not found)", r.old[:40])
		}
		src = bytes.Replace(src, []byte(r.old), []byte(r.new), 1)
	}
	overlay[name] = src
	res, err := extract.Run(extract.Config{Dir: demoDir(t), Patterns: []string{"./..."}, Overlay: overlay})
	if err != nil {
		t.Fatal(err)
	}
	f := flowNamed(t, res, "payments.charge")
	if !f.TxOnly || f.Idempotency.Claim != "in_tx" || f.Idempotency.Mode != "required" || fmt.Sprint(f.Effects) != "[write]" {
		t.Errorf("payments.charge with the proposal: %s", jsonString(f))
	}
	as := runDemoAsWritten(t)
	if g := flowNamed(t, as, "payments.charge"); g.TxOnly {
		t.Errorf("payments.charge as written is TxOnly: %s", jsonString(g))
	}
}
