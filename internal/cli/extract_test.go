package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/okengine/oke/extract"
)

const rules = "../../extract/testdata/rules/"

// oke extract: exit 1 and FILE:LINE:COL: flow "NAME": WHAT; FIX on stderr
// when a flow breaks a rule, and nothing written.
func TestExtractBrokenRuleExits1(t *testing.T) {
	out := t.TempDir()
	code, stdout, stderr := run("extract", "-o", out, rules+"ttl")
	if code != 1 {
		t.Fatalf("exit %d, want 1\nstderr:\n%s", code, stderr)
	}
	want := `extract/testdata/rules/ttl/ttl.go:15:12: flow "ttl.note": Idempotency.TTL "2 s" is not a TTL: want a positive integer followed by ms, s, m, h or d; write it like "24h", "15m" or "7d", or leave TTL out for 24h
extract/testdata/rules/ttl/ttl.go:27:2: flow "ttl.hook": the webhook binding's DedupeTTL "soon" is not a TTL (a positive integer followed by ms, s, m, h or d); write e.g. .DedupeTTL("30d")
oke extract: 2 broken rules; nothing written
`
	if stderr != want || stdout != "" {
		t.Errorf("stderr:\n%s\nwant:\n%s\nstdout: %q", stderr, want, stdout)
	}
	if ents, _ := os.ReadDir(out); len(ents) > 0 {
		t.Errorf("-o DIR has %d files", len(ents))
	}
	if _, err := os.Stat(filepath.Join(rules, "ttl", extract.GoFile)); !os.IsNotExist(err) {
		t.Errorf("%s was written", extract.GoFile)
	}
}

// With -json the broken rules are a JSON array of
// {"file","line","col","flow","rule","message"} on stdout; one per rule of
// DESIGN.md section 8.
func TestExtractJSON(t *testing.T) {
	code, stdout, stderr := run("extract", "-json", "-o", t.TempDir(), rules+"ttl", rules+"required", rules+"effects", rules+"steps", rules+"name")
	if code != 1 {
		t.Fatalf("exit %d, want 1\nstderr:\n%s", code, stderr)
	}
	var got []map[string]any
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("stdout is not a JSON array: %v\n%s", err, stdout)
	}
	type row struct {
		file       string
		line, col  float64
		flow, rule string
		message    string // a prefix of it
	}
	want := []row{
		{"extract/testdata/rules/effects/effects.go", 19, 15, "effects.publish", "effects", "Options.Effects declares [read] but the flow also has raw"},
		{"extract/testdata/rules/name/name.go", 20, 19, "name.charge", "name", "another flow has this name"},
		{"extract/testdata/rules/required/required.go", 25, 14, "required.stream", "required", "Idempotency is required, but the flow is a stream"},
		{"extract/testdata/rules/required/required.go", 31, 12, "required.live", "required", "Idempotency is required, but the flow is a live feed"},
		{"extract/testdata/rules/required/required.go", 36, 16, "required.readOnly", "required", "Idempotency is required, but the flow has no effect that qualifies"},
		{"extract/testdata/rules/required/required.go", 46, 2, "required.get", "required", "Idempotency is required, but the flow is bound to GET /items/{id}"},
		{"extract/testdata/rules/steps/steps.go", 26, 16, "steps.twice", "step-name", `step name "charge" is used twice in one run`},
		{"extract/testdata/rules/steps/steps.go", 35, 17, "steps.loop", "step-name", `step name "charge" is used in a loop`},
		{"extract/testdata/rules/ttl/ttl.go", 15, 12, "ttl.note", "ttl", `Idempotency.TTL "2 s" is not a TTL`},
		{"extract/testdata/rules/ttl/ttl.go", 27, 2, "ttl.hook", "ttl", `the webhook binding's DedupeTTL "soon" is not a TTL`},
	}
	if len(got) != len(want) {
		t.Fatalf("%d diagnostics, want %d:\n%s", len(got), len(want), stdout)
	}
	for i, w := range want {
		g := got[i]
		keys := []string{}
		for k := range g {
			keys = append(keys, k)
		}
		if len(keys) != 6 {
			t.Errorf("diagnostic %d has keys %v, want file, line, col, flow, rule, message", i, keys)
		}
		msg, _ := g["message"].(string)
		if g["file"] != w.file || g["line"] != w.line || g["col"] != w.col || g["flow"] != w.flow || g["rule"] != w.rule || !strings.HasPrefix(msg, w.message) || !strings.Contains(msg, "; ") {
			t.Errorf("diagnostic %d = %v, want %+v", i, g, w)
		}
	}
	if !strings.HasSuffix(stderr, "oke extract: 10 broken rules; nothing written\n") {
		t.Errorf("stderr:\n%s", stderr)
	}
}

// A run that breaks no rule exits 0, prints [] with -json, warns about
// what it could not read, and writes the contract, the OpenAPI document
// and the Go file.
func TestExtractWrites(t *testing.T) {
	// A copy of a fixture, so that its oke_contract_gen.go is written
	// outside the fixture (still in the module, under testdata).
	pkg, err := os.MkdirTemp("../../extract/testdata", "tmp-cli-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(pkg) })
	src, err := os.ReadFile(rules + "runtime/runtime.go")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pkg, "runtime.go"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	code, stdout, stderr := run("extract", "-json", "-o", out, pkg)
	if code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", code, stderr)
	}
	// With -json the warning is in the array too, as a warning: it does
	// not change the exit status.
	var diags []extract.Diagnostic
	if err := json.Unmarshal([]byte(stdout), &diags); err != nil || len(diags) != 1 ||
		diags[0].Severity != extract.SeverityWarning || diags[0].Flow != "runtime.charge" {
		t.Errorf("stdout %q (%v), want one warning of flow runtime.charge with severity warning", stdout, err)
	}
	base := filepath.Base(pkg)
	if !strings.Contains(stderr, `extract/testdata/`+base+`/runtime.go:21:9: flow "runtime.charge": warning: options computed at run time`) {
		t.Errorf("stderr has no warning:\n%s", stderr)
	}
	for _, name := range []string{filepath.Join(out, extract.ContractFile), filepath.Join(out, extract.OpenAPIFile), filepath.Join(pkg, extract.GoFile)} {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Errorf("not written: %v", err)
			continue
		}
		if !strings.Contains(string(b), "runtime.charge") {
			t.Errorf("%s does not name the flow", name)
		}
	}
	gen, _ := os.ReadFile(filepath.Join(pkg, extract.GoFile))
	if !strings.HasPrefix(string(gen), extract.GoHeader+"\n") {
		t.Errorf("%s starts %q", extract.GoFile, strings.SplitN(string(gen), "\n", 2)[0])
	}
	var c extract.Contract
	b, _ := os.ReadFile(filepath.Join(out, extract.ContractFile))
	if err := json.Unmarshal(b, &c); err != nil || c.Version != 1 || len(c.Flows) != 1 {
		t.Errorf("contract %s (%v)", b, err)
	}
	// Nothing but the files and no temporary file left behind.
	ents, _ := os.ReadDir(out)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if !reflect.DeepEqual(names, []string{extract.ContractFile, extract.OpenAPIFile}) {
		t.Errorf("-o DIR holds %v", names)
	}
}

func TestExtractUsageAndLoadErrorsExit2(t *testing.T) {
	cases := []struct {
		name   string
		args   []string
		stderr string
	}{
		{"an unknown flag", []string{"extract", "-nope"}, "flag provided but not defined: -nope"},
		{"an empty -o", []string{"extract", "-o", ""}, "-o needs a directory"},
		{"a package that does not exist", []string{"extract", "./no/such/package"}, "oke extract: load packages:"},
		{"a package that does not compile", []string{"extract", "../../extract/testdata/broken"}, "undefined: oke.NoSuchThing"},
		{"-check: an unknown flag", []string{"extract", "-check", "-nope"}, "flag provided but not defined: -nope"},
		{"-check: an empty -o", []string{"extract", "-check", "-o", ""}, "-o needs a directory"},
		{"-check: a package that does not exist", []string{"extract", "-check", "./no/such/package"}, "oke extract: load packages:"},
		{"-check: a package that does not compile", []string{"extract", "-check", "../../extract/testdata/broken"}, "undefined: oke.NoSuchThing"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := run(tc.args...)
			if code != 2 || !strings.Contains(stderr, tc.stderr) {
				t.Errorf("exit %d, stderr:\n%s\nwant 2 and %q", code, stderr, tc.stderr)
			}
		})
	}
}

func TestExtractHelp(t *testing.T) {
	code, stdout, _ := run("help", "extract")
	if code != 0 || !strings.Contains(stdout, "Usage: oke extract [-o DIR] [-json] [PACKAGES]\n       oke extract -check [-o DIR] [-json] [PACKAGES]") || !strings.Contains(stdout, "//go:generate go tool oke extract") {
		t.Errorf("exit %d, stdout:\n%s", code, stdout)
	}
}

// An effect outside fx is a warning, in the -json array with rule
// effect-outside-fx and severity warning; the exit status stays 0 and the
// contract is written, with the flow's effect raw.
func TestExtractWarnsAboutEffectsOutsideFx(t *testing.T) {
	pkg, err := os.MkdirTemp("../../extract/testdata", "tmp-cli-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(pkg) })
	src := `package outside

import (
	"context"
	"os"

	"github.com/okengine/oke"
)

type In struct {
	ID string ` + "`json:\"id\"`" + `
}

var Save = oke.NewFlow("outside.save", oke.Options{},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[struct{}], error) {
		return oke.OK(struct{}{}), os.WriteFile(in.ID, nil, 0o644)
	})

func Bind(app *oke.App) { app.Handle(oke.POST("/save"), Save) }
`
	if err := os.WriteFile(filepath.Join(pkg, "outside.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	code, stdout, stderr := run("extract", "-json", "-o", out, pkg)
	if code != 0 {
		t.Fatalf("exit %d, want 0\nstderr:\n%s", code, stderr)
	}
	var diags []extract.Diagnostic
	if err := json.Unmarshal([]byte(stdout), &diags); err != nil {
		t.Fatalf("stdout %q: %v", stdout, err)
	}
	base := filepath.Base(pkg)
	if len(diags) != 1 || diags[0].Rule != extract.RuleOutsideFx || diags[0].Severity != extract.SeverityWarning ||
		diags[0].File != "extract/testdata/"+base+"/outside.go" || diags[0].Line != 16 || diags[0].Flow != "outside.save" ||
		!strings.Contains(diags[0].Message, "os.WriteFile") || !strings.Contains(diags[0].Message, "fix: ") {
		t.Errorf("diagnostics %+v, want one effect-outside-fx warning at outside.go:16 naming os.WriteFile and the fix", diags)
	}
	if !strings.Contains(stderr, `outside.go:16:`) || !strings.Contains(stderr, `flow "outside.save": warning: `) {
		t.Errorf("stderr has no warning:\n%s", stderr)
	}
	var c extract.Contract
	b, err := os.ReadFile(filepath.Join(out, extract.ContractFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &c); err != nil || len(c.Flows) != 1 || strings.Join(c.Flows[0].Effects, ",") != "raw" ||
		len(c.Flows[0].Why["raw"]) != 1 || !c.Flows[0].Bindings[0].Honored {
		t.Errorf("contract %s: want outside.save with effects [raw], its why, and its POST honored", b)
	}
}

// checkSrc is a package with one flow whose effects come from a helper.
const checkSrc = `package check

import (
	"context"
	"database/sql"

	"github.com/okengine/oke"
)

type In struct {
	Item string ` + "`json:\"item\"`" + `
}

func Register(app *oke.App, db *sql.DB) {
	app.Handle(oke.POST("/orders"), oke.NewFlow("check.order", oke.Options{}, func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[In], error) {
		return save(ctx, fx, db, in)
	}))
}

func save(ctx context.Context, fx *oke.Fx, db *sql.DB, in In) (oke.Response[In], error) {
	_, err := fx.Store(db).Exec(ctx, "UPDATE orders SET seen = true WHERE item = $1", in.Item)
	return oke.OK(in), err
}
`

// oke extract -check writes nothing and exits 0 while the contract matches
// the code (also after a formatting-only change), and 1 naming the flow,
// what differs and the fix once the code changed; with -json the stale
// flows are diagnostics of rule stale-contract on stdout.
func TestExtractCheck(t *testing.T) {
	pkg, err := os.MkdirTemp("../../extract/testdata", "tmp-check-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(pkg) })
	src := filepath.Join(pkg, "check.go")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(src, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(checkSrc)
	out := t.TempDir()
	if code, _, stderr := run("extract", "-o", out, pkg); code != 0 {
		t.Fatalf("extract: exit %d\n%s", code, stderr)
	}
	snapshot := func() map[string]string {
		m := map[string]string{}
		for _, name := range []string{filepath.Join(out, extract.ContractFile), filepath.Join(out, extract.OpenAPIFile), filepath.Join(pkg, extract.GoFile)} {
			b, _ := os.ReadFile(name)
			m[name] = string(b)
		}
		return m
	}
	written := snapshot()

	code, stdout, stderr := run("extract", "-check", "-o", out, pkg)
	if code != 0 || stdout != "" || !strings.HasSuffix(stderr, "oke extract: the contract of 1 flow in "+out+" is fresh\n") {
		t.Errorf("fresh: exit %d, stdout %q, stderr:\n%s", code, stdout, stderr)
	}

	// Formatting and comments only: still fresh (the line numbers the
	// contract records moved; -check does not compare them).
	write(strings.Replace(checkSrc, "func save(", "// save marks the order seen.\n//\n// (Comments only.)\n\n\nfunc save(", 1))
	if code, _, stderr := run("extract", "-check", "-o", out, pkg); code != 0 {
		t.Errorf("formatting only: exit %d, stderr:\n%s", code, stderr)
	}

	// The helper's statement changed: stale.
	write(strings.Replace(checkSrc, "SET seen = true", "SET seen = false", 1))
	code, stdout, stderr = run("extract", "-check", "-o", out, pkg)
	base := "extract/testdata/" + filepath.Base(pkg)
	want := base + `/check.go:15:34: flow "check.order": its contract is stale (` +
		filepath.ToSlash(filepath.Join(out, extract.ContractFile)) + `: digest (the code changed), why; ` +
		base + `/oke_contract_gen.go: digest (the code changed) and its entry); fix: run go generate (or oke extract -o ` + out + ` ` + pkg + `) and commit the result
oke extract: 1 of 1 flow's contract is stale or missing in ` + out + `; nothing written
`
	if code != 1 || stdout != "" || stderr != want {
		t.Errorf("stale: exit %d, stdout %q, stderr:\n%s\nwant:\n%s", code, stdout, stderr, want)
	}
	code, stdout, _ = run("extract", "-check", "-json", "-o", out, pkg)
	var diags []extract.Diagnostic
	if err := json.Unmarshal([]byte(stdout), &diags); err != nil || code != 1 || len(diags) != 1 ||
		diags[0].Rule != "stale-contract" || diags[0].Flow != "check.order" || diags[0].Line != 15 {
		t.Errorf("-json: exit %d, %v, stdout:\n%s", code, err, stdout)
	}
	if got := snapshot(); !reflect.DeepEqual(got, written) {
		t.Errorf("-check wrote files")
	}

	// A missing file is stale too.
	os.Remove(filepath.Join(out, extract.OpenAPIFile))
	write(checkSrc)
	code, _, stderr = run("extract", "-check", "-o", out, pkg)
	if code != 1 || !strings.Contains(stderr, "openapi.json is missing") {
		t.Errorf("missing file: exit %d, stderr:\n%s", code, stderr)
	}
}

// The checked-in demo contract is fresh, checked as CI checks it (.ci/run),
// with the arguments of examples/payments/app/generate.go.
func TestExtractCheckDemo(t *testing.T) {
	code, _, stderr := run("extract", "-check", "-o", "../../examples/payments", "../../examples/payments/app")
	if code != 0 {
		t.Errorf("exit %d, stderr:\n%s", code, stderr)
	}
}
