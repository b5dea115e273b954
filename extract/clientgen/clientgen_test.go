package clientgen_test

import (
	"bytes"
	"flag"
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/okengine/oke/extract"
	"github.com/okengine/oke/extract/clientgen"
)

var update = flag.Bool("update", false, "rewrite the generated clients: the demo's (examples/payments/paymentsclient) and the fixture's (testdata/shopclient)")

const (
	modPath     = "github.com/okengine/oke"
	demoClient  = modPath + "/examples/payments/paymentsclient"
	shopClient  = modPath + "/extract/clientgen/testdata/shopclient"
	fixturePkgs = "./testdata/shop ./testdata/depot ./testdata/clash"
)

func moduleRoot(t *testing.T) string {
	t.Helper()
	abs, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(abs, "go.mod")); err != nil {
		t.Fatal(err)
	}
	return abs
}

// extracts caches one extract run per directory and patterns: loading is
// most of the cost.
var extracts sync.Map

type cached struct {
	once sync.Once
	res  *extract.Result
	err  error
}

func extractIn(t *testing.T, dir, patterns string) *extract.Result {
	t.Helper()
	v, _ := extracts.LoadOrStore(dir+"\x00"+patterns, &cached{})
	c := v.(*cached)
	c.once.Do(func() { c.res, c.err = extract.Run(extract.Config{Dir: dir, Patterns: strings.Fields(patterns)}) })
	if c.err != nil {
		t.Fatalf("extract %s: %v", patterns, c.err)
	}
	if len(c.res.Diagnostics) > 0 {
		t.Fatalf("extract %s: broken rules: %v", patterns, c.res.Diagnostics)
	}
	return c.res
}

// only is res with just the flows keep accepts.
func only(res *extract.Result, keep func(name string) bool) *extract.Result {
	sub := *res
	sub.Contract.Flows = nil
	for _, f := range res.Contract.Flows {
		if keep(f.Name) {
			sub.Contract.Flows = append(sub.Contract.Flows, f)
		}
	}
	return &sub
}

// fixture is the shop's and the depot's flows (not clash's).
func fixture(t *testing.T) *extract.Result {
	return only(extractIn(t, "", fixturePkgs), func(n string) bool {
		return !strings.HasPrefix(n, "clash.") && n != "client" && !strings.HasPrefix(n, "pay")
	})
}

// checkGenerated compares (or, with -update, writes) the client generated
// into dir.
func checkGenerated(t *testing.T, dir string, src []byte) {
	t.Helper()
	if *update {
		if _, err := clientgen.Write(dir, src); err != nil {
			t.Fatal(err)
		}
	}
	name := filepath.Join(dir, clientgen.FileName)
	got, err := os.ReadFile(name)
	if err != nil {
		t.Fatalf("%v (run go test ./extract/clientgen -run %s -update)", err, t.Name())
	}
	if !bytes.Equal(got, src) {
		t.Errorf("%s is stale: it differs from what oke gen client writes now (run go generate ./examples/payments/paymentsclient, or go test ./extract/clientgen -run %s -update):\n%s", name, t.Name(), firstDiff(got, src))
	}
}

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
			return fmt.Sprintf("line %d:\n  file:      %s\n  generated: %s", i+1, a, b)
		}
	}
	return "(same lines)"
}

// importsOf lists the import paths of a Go file.
func importsOf(t *testing.T, src []byte) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "", src, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, im := range f.Imports {
		p, _ := strconv.Unquote(im.Path.Value)
		out = append(out, p)
	}
	return out
}

// goTool runs the go command in the module root.
func goTool(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = moduleRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// The demo's generated client is checked in (examples/payments/
// paymentsclient) and the demo's tests use it: generating it again gives
// its bytes back. CI fails here when a flow or a type changed and the
// client was not regenerated.
func TestDemoClientIsFresh(t *testing.T) {
	res := extractIn(t, filepath.Join(moduleRoot(t), "examples", "payments"), "./app")
	src, err := clientgen.Generate(res, clientgen.Config{Package: "paymentsclient", ImportPath: demoClient})
	if err != nil {
		t.Fatal(err)
	}
	checkGenerated(t, filepath.Join(moduleRoot(t), "examples", "payments", "paymentsclient"), src)
	if !bytes.HasPrefix(src, []byte(clientgen.Header+"\n")) {
		t.Errorf("the file starts %q", bytes.SplitN(src, []byte("\n"), 2)[0])
	}
	// It stands alone: a program using it links neither the demo nor its
	// drivers (pgx, SQLite).
	for _, p := range importsOf(t, src) {
		if strings.HasPrefix(p, modPath+"/") && p != modPath+"/client" {
			t.Errorf("the demo's client imports %s", p)
		}
	}
}

// The fixture's client (testdata/shopclient), with ImportTypes: every
// shape of method, the shop's types imported, the internal package's and
// the depot's (package main) copied. It is checked in beside tests of what
// each method sends; it must pass go vet and those tests.
func TestFixtureClient(t *testing.T) {
	src, err := clientgen.Generate(fixture(t), clientgen.Config{Package: "shopclient", ImportPath: shopClient, ImportTypes: true})
	if err != nil {
		t.Fatal(err)
	}
	checkGenerated(t, "testdata/shopclient", src)
	for _, want := range []string{
		`"github.com/okengine/oke/extract/clientgen/testdata/shop"`, // importable: imported
		"type Dims struct",               // internal to testdata/shop: copied
		"type Crate struct",              // package main: copied
		"func (c *Client) Health(",       // a name without a dot
		"func (f *ShopFlows) CreateRPC(", // a second binding of one flow
		"shop.hook, webhook POST /hooks/provider: a provider calls it",
		"shop.restock, event stock.low",
	} {
		if !bytes.Contains(src, []byte(want)) {
			t.Errorf("the fixture's client has no %q", want)
		}
	}
	goTool(t, "vet", "./extract/clientgen/testdata/shopclient")
	goTool(t, "test", "-count=1", "./extract/clientgen/testdata/shopclient")
}

// By default the client stands alone: it imports nothing of the app (the
// demo's and the shop's types are all copies, each saying so), and the
// package compiles and vets. CopyTypes (the old flag's field) and an
// unknown ImportPath (a directory in no module yet) give the same bytes.
func TestStandaloneByDefault(t *testing.T) {
	root := moduleRoot(t)
	cases := []struct {
		name string
		res  *extract.Result
		app  string // the import the client must not have
	}{
		{"demo", extractIn(t, filepath.Join(root, "examples", "payments"), "./app"), `"github.com/okengine/oke/examples/payments/app"`},
		{"fixture", fixture(t), `"github.com/okengine/oke/extract/clientgen/testdata/shop"`},
	}
	var pkgs []string
	for _, tc := range cases {
		dir, err := os.MkdirTemp("testdata", "tmp-copy-"+tc.name+"-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		cfg := clientgen.Config{Package: "copied", ImportPath: modPath + "/extract/clientgen/" + filepath.ToSlash(dir)}
		src, err := clientgen.Generate(tc.res, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(src, []byte(tc.app)) {
			t.Errorf("%s: the client imports %s", tc.name, tc.app)
		}
		if imports := importsOf(t, src); len(imports) == 0 {
			t.Errorf("%s: no imports", tc.name)
		} else {
			for _, p := range imports {
				if p != "github.com/okengine/oke/client" && strings.Contains(strings.SplitN(p, "/", 2)[0], ".") {
					t.Errorf("%s: the standalone client imports %s; want only the standard library and the client package", tc.name, p)
				}
			}
		}
		if text := strings.ReplaceAll(string(src), "\n// ", " "); !strings.Contains(text, "It stands alone: its types are copies") || !strings.Contains(text, "is a copy of ") {
			t.Errorf("%s: neither the package nor a type says the types are copies", tc.name)
		}
		for _, other := range []clientgen.Config{
			{Package: cfg.Package, ImportPath: cfg.ImportPath, CopyTypes: true},
			{Package: cfg.Package},
		} {
			again, err := clientgen.Generate(tc.res, other)
			if err != nil {
				t.Fatalf("%s: %+v: %v", tc.name, other, err)
			}
			if !bytes.Equal(again, src) {
				t.Errorf("%s: %+v gives other bytes:\n%s", tc.name, other, firstDiff(src, again))
			}
		}
		if _, err := clientgen.Write(dir, src); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, "./extract/clientgen/"+filepath.ToSlash(dir))
	}
	goTool(t, append([]string{"vet"}, pkgs...)...)
}

// Flows with no HTTP or RPC binding make a client with New and no method,
// which still compiles: it does not import context.
func TestNoRouteNoMethod(t *testing.T) {
	res := only(fixture(t), func(n string) bool { return n == "shop.hook" || n == "shop.restock" })
	if len(res.Contract.Flows) != 2 {
		t.Fatalf("flows: %v", res.Contract.Flows)
	}
	src, err := clientgen.Generate(res, clientgen.Config{Package: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if got := importsOf(t, src); len(got) != 1 || got[0] != "github.com/okengine/oke/client" {
		t.Errorf("imports %v, want only the client package:\n%s", got, src)
	}
	if !bytes.Contains(src, []byte("func New(")) || bytes.Contains(src, []byte("ctx context.Context")) {
		t.Errorf("generated:\n%s", src)
	}
}

// The same result gives the same bytes (no map order leaks in).
func TestGenerateIsDeterministic(t *testing.T) {
	res := fixture(t)
	cfg := clientgen.Config{Package: "shopclient", ImportPath: shopClient}
	first, err := clientgen.Generate(res, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		again, err := clientgen.Generate(res, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first, again) {
			t.Fatalf("run %d differs:\n%s", i+2, firstDiff(first, again))
		}
	}
}

func TestGenerateRefuses(t *testing.T) {
	all := extractIn(t, "", fixturePkgs)
	named := func(names ...string) *extract.Result {
		return only(all, func(n string) bool {
			for _, m := range names {
				if n == m {
					return true
				}
			}
			return false
		})
	}
	cases := []struct {
		name string
		res  *extract.Result
		cfg  clientgen.Config
		want string
	}{
		{"two flows, one method", named("clash.get-item", "clash.getItem"), clientgen.Config{Package: "x", ImportPath: shopClient},
			"flow clash.getItem (GET /b) and flow clash.get-item (GET /a) both make the method GetItem; rename one flow"},
		{"a method named like the embedded client", named("client"), clientgen.Config{Package: "x", ImportPath: shopClient},
			"flow client (GET /c) and the embedded *client.Client both make the method Client; rename one flow"},
		{"two groups, one field", named("pay-ments.x", "payMents.y"), clientgen.Config{Package: "x", ImportPath: shopClient},
			"flows payMents.* and pay-ments.* both make the Client field PayMents; rename one group"},
		{"into the flows' own package", named("shop.get"), clientgen.Config{Package: "shop", ImportPath: modPath + "/extract/clientgen/testdata/shop"},
			"flow shop.get is declared in github.com/okengine/oke/extract/clientgen/testdata/shop, the package being generated; generate the client into a package of its own (another -o)"},
		{"into the flows' own package, importing types", named("shop.get"), clientgen.Config{Package: "shop", ImportPath: modPath + "/extract/clientgen/testdata/shop", ImportTypes: true},
			"flow shop.get is declared in github.com/okengine/oke/extract/clientgen/testdata/shop, the package being generated"},
		{"import types with no import path", named("shop.get"), clientgen.Config{Package: "x", ImportTypes: true},
			"the generated package's import path is unknown (Config.ImportPath): a client that imports the app's types must be written inside a Go module"},
		{"both ImportTypes and CopyTypes", named("shop.get"), clientgen.Config{Package: "x", ImportPath: shopClient, ImportTypes: true, CopyTypes: true},
			"ImportTypes and CopyTypes both set"},
		{"a bad package name", named("shop.get"), clientgen.Config{Package: "my-client", ImportPath: shopClient},
			`package name "my-client" is not a Go package name`},
		{"package main", named("shop.get"), clientgen.Config{Package: "main", ImportPath: shopClient},
			`package name "main" is not a Go package name`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src, err := clientgen.Generate(tc.res, tc.cfg)
			if err == nil || err.Error() != tc.want && !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("err = %v\nwant %s", err, tc.want)
			}
			if src != nil {
				t.Error("source returned with the error")
			}
		})
	}
}

func TestImportPath(t *testing.T) {
	root := moduleRoot(t)
	for dir, want := range map[string]string{
		root: modPath,
		filepath.Join(root, "examples", "payments", "paymentsclient"): demoClient,
		filepath.Join(root, "not", "yet", "made"):                     modPath + "/not/yet/made",
	} {
		if got, err := clientgen.ImportPath(dir); err != nil || got != want {
			t.Errorf("ImportPath(%s) = %q, %v; want %q", dir, got, err, want)
		}
	}
	if _, err := clientgen.ImportPath(t.TempDir()); err == nil || !strings.Contains(err.Error(), "is not inside a Go module") {
		t.Errorf("outside a module: %v", err)
	}
}

func TestCheckDir(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := clientgen.CheckDir(filepath.Join(dir, "missing"), "api"); err != nil {
		t.Errorf("a directory to be made: %v", err)
	}
	write("doc.go", "package api\n")
	write("x_test.go", "package api_test\n")
	if err := clientgen.CheckDir(dir, "api"); err != nil {
		t.Errorf("package api: %v", err)
	}
	if err := clientgen.CheckDir(dir, "other"); err == nil || !strings.Contains(err.Error(), "holds package api (doc.go), not other: pass -pkg api, or pick another -o") {
		t.Errorf("another package: %v", err)
	}
	write(clientgen.FileName, "package api\n")
	if err := clientgen.CheckDir(dir, "api"); err == nil || !strings.Contains(err.Error(), "was not written by oke gen client") {
		t.Errorf("a hand-written %s: %v", clientgen.FileName, err)
	}
	write(clientgen.FileName, clientgen.Header+"\n\npackage api\n")
	if err := clientgen.CheckDir(dir, "api"); err != nil {
		t.Errorf("a generated %s: %v", clientgen.FileName, err)
	}
}

// Write replaces the file whole or not at all, and leaves no temporary
// file behind.
func TestWriteIsAtomic(t *testing.T) {
	dir := t.TempDir()
	name, err := clientgen.Write(filepath.Join(dir, "api"), []byte("one"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := clientgen.Write(filepath.Join(dir, "api"), []byte("two")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(name); string(b) != "two" {
		t.Errorf("file holds %q", b)
	}
	// A directory where the file should be: the rename fails, nothing is left.
	blocked := filepath.Join(dir, "blocked")
	if err := os.MkdirAll(filepath.Join(blocked, clientgen.FileName, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := clientgen.Write(blocked, []byte("three")); err == nil {
		t.Fatal("no error")
	}
	ents, _ := os.ReadDir(blocked)
	if len(ents) != 1 {
		t.Errorf("left behind: %v", ents)
	}
}
