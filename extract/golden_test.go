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

func demoDir(t *testing.T) string { return filepath.Join(moduleRoot(t), "examples", "payments") }

// The demo passes its own extract, and its contract, OpenAPI document and
// generated Go file are checked in: extracting the demo gives them back
// byte for byte (CI fails when they are stale; `go generate
// ./examples/payments/app` rewrites them).
func TestDemoGolden(t *testing.T) {
	res := runIn(t, demoDir(t), "./...")
	if len(res.Diagnostics) > 0 {
		t.Fatalf("the demo breaks rules:\n%v", res.Diagnostics)
	}
	checkGolden(t, res, demoDir(t), 3)
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

// payments.charge's only effect is its INSERT through fx.Tx, with constant
// options: it is TxOnly, and ClaimAuto holds its claim in its transaction.
// An fx.Emit after the INSERT (as an earlier demo had) makes it claim
// first.
func TestDemoChargeIsTxOnly(t *testing.T) {
	res := runIn(t, demoDir(t), "./...")
	f := flowNamed(t, res, "payments.charge")
	if !f.TxOnly || f.Idempotency.Claim != "in_tx" || f.Idempotency.Mode != "required" || fmt.Sprint(f.Effects) != "[write]" {
		t.Errorf("payments.charge as written: %s", jsonString(f))
	}
	name := filepath.Join(moduleRoot(t), "examples/payments/app/charges.go")
	src, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	old := "\treturn oke.Created(c, \"/charges/\"+c.ID), nil\n"
	if !bytes.Contains(src, []byte(old)) {
		t.Fatalf("charges.go changed: update this test (%q not found)", old)
	}
	src = bytes.Replace(src, []byte(old), []byte("\tif err := fx.Emit(ctx, \"charge.created\", c); err != nil {\n\t\treturn oke.Response[Charge]{}, err\n\t}\n"+old), 1)
	res, err = extract.Run(extract.Config{Dir: demoDir(t), Patterns: []string{"./..."}, Overlay: map[string][]byte{name: src}})
	if err != nil {
		t.Fatal(err)
	}
	if g := flowNamed(t, res, "payments.charge"); g.TxOnly || g.Idempotency.Claim != "first" || fmt.Sprint(g.Effects) != "[write emit]" {
		t.Errorf("payments.charge with an emit: %s", jsonString(g))
	}
}
