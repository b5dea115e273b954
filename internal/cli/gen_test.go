package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/okengine/oke/extract/clientgen"
	"github.com/okengine/oke/internal/cli"
)

const shopFixture = "../../extract/clientgen/testdata/shop"

// genDir makes a directory for a generated client inside the module
// (under extract/clientgen/testdata, so go vet can build it), removed when
// the test ends.
func genDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("../../extract/clientgen/testdata", "tmp-cli-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// withGoMod is a new directory holding a go.mod of module mod.
func withGoMod(t *testing.T, mod string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module "+mod+"\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// oke gen client writes the client, gofmt'ed and vet-clean, and says so:
// standalone by default (copies of the types; -copy-types, the old flag,
// is the same), the app's own types with -import-types.
func TestGenClientWrites(t *testing.T) {
	const shopImport = `"github.com/okengine/oke/extract/clientgen/testdata/shop"`
	cases := []struct {
		name      string
		flags     []string
		signature string
		imports   bool // the client imports the shop's package
	}{
		{"standalone by default", nil, "func (f *ShopFlows) Create(ctx context.Context, in CreateIn, opts ...client.CallOption) (Item, client.Meta, error)", false},
		{"-copy-types is the default", []string{"-copy-types"}, "func (f *ShopFlows) Create(ctx context.Context, in CreateIn, opts ...client.CallOption) (Item, client.Meta, error)", false},
		{"-import-types", []string{"-import-types"}, "func (f *ShopFlows) Create(ctx context.Context, in shop.CreateIn, opts ...client.CallOption) (shop.Item, client.Meta, error)", true},
	}
	var dirs []string
	for _, tc := range cases {
		dir := genDir(t) // the parent's: go vet builds them all at the end
		dirs = append(dirs, "./"+filepath.ToSlash(dir))
		t.Run(tc.name, func(t *testing.T) {
			args := append(append([]string{"gen", "client", "-o", dir, "-pkg", "shopapi"}, tc.flags...), shopFixture)
			code, stdout, stderr := run(args...)
			if code != 0 {
				t.Fatalf("exit %d\nstderr:\n%s", code, stderr)
			}
			name := filepath.Join(dir, clientgen.FileName)
			src, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(src), clientgen.Header+"\n") || !strings.Contains(string(src), "\npackage shopapi\n") ||
				!strings.Contains(string(src), tc.signature) {
				t.Errorf("generated:\n%s", src)
			}
			if got := strings.Contains(string(src), shopImport); got != tc.imports {
				t.Errorf("imports %s: %v, want %v", shopImport, got, tc.imports)
			}
			if stdout != "" || !strings.Contains(stderr, "oke gen client: wrote ") || !strings.HasSuffix(stderr, clientgen.FileName+"\n") {
				t.Errorf("stdout %q, stderr %q", stdout, stderr)
			}
			ents, _ := os.ReadDir(dir)
			if len(ents) != 1 {
				t.Errorf("the directory holds %v, want the one file", ents)
			}
			if out, err := exec.Command("gofmt", "-l", name).CombinedOutput(); err != nil || len(out) > 0 {
				t.Errorf("gofmt -l: %s %v", out, err)
			}
		})
	}
	vet := exec.Command("go", append([]string{"vet"}, dirs...)...)
	if out, err := vet.CombinedOutput(); err != nil {
		t.Fatalf("go vet: %v\n%s", err, out)
	}
}

// With -module PATH, a standalone client outside any module is a module of
// its own: DIR/go.mod is written beside the client (and kept as it is when
// the client is generated again), and the message says to run go mod tidy.
func TestGenClientOwnModule(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "shopapi")
	for i := range 2 {
		code, _, stderr := run("gen", "client", "-o", dir, "-module", "example.com/shopapi", shopFixture)
		if code != 0 {
			t.Fatalf("run %d: exit %d\nstderr:\n%s", i+1, code, stderr)
		}
		wroteMod := strings.Contains(stderr, "go.mod (module example.com/shopapi); run go mod tidy in ")
		if wroteMod != (i == 0) {
			t.Errorf("run %d: stderr %q; want go.mod written on the first run only", i+1, stderr)
		}
	}
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(gomod), "module example.com/shopapi\n\ngo 1.") {
		t.Errorf("go.mod:\n%s", gomod)
	}
	src, err := os.ReadFile(filepath.Join(dir, clientgen.FileName))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(src), "\npackage shopapi\n") || strings.Contains(string(src), "testdata/shop\"") {
		t.Errorf("generated:\n%s", src)
	}
}

// A standalone client may be written into another module than the app's;
// when that module does not require oke yet, a note says how to add it.
func TestGenClientIntoAnotherModule(t *testing.T) {
	mod := t.TempDir()
	if err := os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module example.com/other\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := run("gen", "client", "-o", filepath.Join(mod, "api"), shopFixture)
	if code != 0 || !strings.Contains(stderr, "(module example.com/other) does not require github.com/okengine/oke yet: run go get github.com/okengine/oke/client there") {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(mod, "api", clientgen.FileName)); err != nil {
		t.Error(err)
	}
	if _, err := os.Stat(filepath.Join(mod, "api", "go.mod")); err == nil {
		t.Error("a go.mod was written without -module")
	}
}

// A client generated before that no longer compiles (a type it named is
// gone) does not stop its own regeneration, even when PACKAGES include
// it; -pkg defaults to the package already there.
func TestGenClientReplacesAStaleClient(t *testing.T) {
	dir := genDir(t)
	stale := clientgen.Header + "\n\npackage shopapi\n\nvar _ = shop.Gone{}\n"
	if err := os.WriteFile(filepath.Join(dir, clientgen.FileName), []byte(stale), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "doc.go"), []byte("// Package shopapi is a client.\npackage shopapi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := run("gen", "client", "-o", dir, shopFixture, dir)
	if code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", code, stderr)
	}
	src, _ := os.ReadFile(filepath.Join(dir, clientgen.FileName))
	if strings.Contains(string(src), "shop.Gone") || !strings.Contains(string(src), "\npackage shopapi\n") {
		t.Errorf("not regenerated:\n%s", src)
	}
}

// A flow that breaks extract's rules: exit 1, the diagnostics, nothing
// written.
func TestGenClientBrokenRulesExit1(t *testing.T) {
	dir := genDir(t)
	code, _, stderr := run("gen", "client", "-o", dir, "-pkg", "x", rules+"ttl")
	if code != 1 || !strings.Contains(stderr, `flow "ttl.note": Idempotency.TTL "2 s" is not a TTL`) || !strings.HasSuffix(stderr, "oke gen client: 2 broken rules (see oke extract); nothing written\n") {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	if ents, _ := os.ReadDir(dir); len(ents) > 0 {
		t.Errorf("written: %v", ents)
	}
}

func TestGenUsageErrors(t *testing.T) {
	other := genDir(t)
	if err := os.WriteFile(filepath.Join(other, "x.go"), []byte("package other\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mine := genDir(t)
	if err := os.WriteFile(filepath.Join(mine, clientgen.FileName), []byte("package mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"gen alone", []string{"gen"}, 2, "Usage: oke gen client -o DIR"},
		{"an unknown generator", []string{"gen", "server"}, 2, `oke gen: unknown generator "server"; the one there is: client`},
		{"no -o", []string{"gen", "client", shopFixture}, 2, "oke gen client: -o DIR is required"},
		{"a -o that is no package name", []string{"gen", "client", "-o", t.TempDir() + "/my-api", shopFixture}, 2, "-pkg NAME is required: my-api is not a Go package name"},
		{"-o outside a module", []string{"gen", "client", "-o", t.TempDir(), "-pkg", "x", shopFixture}, 2, "is not inside a Go module (no go.mod in it or above it); pass -module PATH to make it a module of its own"},
		{"-o outside a module, importing types", []string{"gen", "client", "-o", t.TempDir(), "-pkg", "x", "-import-types", shopFixture}, 2, "a client that imports the app's types belongs in a module that requires the app's"},
		{"-import-types and -copy-types", []string{"gen", "client", "-o", genDir(t), "-pkg", "x", "-import-types", "-copy-types", shopFixture}, 2, "-import-types and -copy-types contradict each other"},
		{"-module with -import-types", []string{"gen", "client", "-o", t.TempDir(), "-pkg", "x", "-module", "example.com/x", "-import-types", shopFixture}, 2, "-module makes DIR a module of its own, which cannot import the app's packages"},
		{"a bad -module", []string{"gen", "client", "-o", t.TempDir(), "-pkg", "x", "-module", "not a path", shopFixture}, 2, `-module "not a path" is not a module path`},
		{"-module unlike DIR's go.mod", []string{"gen", "client", "-o", withGoMod(t, "example.com/have"), "-pkg", "x", "-module", "example.com/want", shopFixture}, 2, "declares module example.com/have, not example.com/want: pass -module example.com/have, or leave -module out"},
		{"-o holds another package", []string{"gen", "client", "-o", other, "-pkg", "x", shopFixture}, 2, "holds package other (x.go), not x: pass -pkg other, or pick another -o"},
		{"-o holds a hand-written file of that name", []string{"gen", "client", "-o", mine, "-pkg", "mine", shopFixture}, 2, "was not written by oke gen client"},
		{"a package that does not exist", []string{"gen", "client", "-o", genDir(t), "-pkg", "x", "./no/such/package"}, 2, "oke gen client: load packages:"},
		{"a bad -pkg", []string{"gen", "client", "-o", genDir(t), "-pkg", "my-api", shopFixture}, 2, `oke gen client: -pkg "my-api" is not a Go package name`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := run(tc.args...)
			if code != tc.code || !strings.Contains(stderr, tc.stderr) {
				t.Errorf("exit %d, stderr:\n%s\nwant %d and %q", code, stderr, tc.code, tc.stderr)
			}
		})
	}
}

func TestGenHelp(t *testing.T) {
	code, stdout, _ := run("help", "gen")
	if code != 0 || !strings.Contains(stdout, "client    write a typed Go client") {
		t.Errorf("help gen: exit %d\n%s", code, stdout)
	}
	code, _, stderr := run("gen", "client", "-h")
	if code != 0 || !strings.Contains(stderr, "Usage: oke gen client -o DIR [-pkg NAME] [-import-types | -module PATH] [PACKAGES]") || !strings.Contains(stderr, "//go:generate go tool oke gen client") {
		t.Errorf("gen client -h: exit %d\n%s", code, stderr)
	}
}

// A client module's go line is the language version of the toolchain
// that built oke.
func TestClientGoLine(t *testing.T) {
	for version, want := range map[string]string{
		"go1.26.8":                        "1.26",
		"go1.26":                          "1.26",
		"go1.27rc1":                       "1.27",
		"go1.30.0 X:jsonv2":               "1.30",
		"devel go1.27-abcdef Mon Jan 1 …": "1.26",
		"":                                "1.26",
	} {
		if got := cli.GoLineOf(version); got != want {
			t.Errorf("GoLineOf(%q) = %q, want %q", version, got, want)
		}
	}
}
