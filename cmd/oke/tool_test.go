package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The files of a user's module: one package of flows with its
// //go:generate line, and one whose durable flow reads the clock outside a
// step (oke vet's finding).
var userModule = map[string]string{
	"go.mod": "module example.com/shop\n\ngo 1.26\n",
	"orders/orders.go": `package orders

import (
	"context"

	"github.com/okengine/oke"
)

type PlaceIn struct {
	Item string ` + "`json:\"item\"`" + `
}

type Order struct {
	ID   string ` + "`json:\"id\"`" + `
	Item string ` + "`json:\"item\"`" + `
}

// Place answers an order; it only computes, so it ignores the header.
var Place = oke.NewFlow("shop.place", oke.Options{},
	func(ctx context.Context, in PlaceIn, fx *oke.Fx) (oke.Response[Order], error) {
		return oke.Created(Order{ID: "o1", Item: in.Item}, "/orders/o1"), nil
	})

// Routes binds the flows.
func Routes(app *oke.App) {
	app.Handle(oke.POST("/orders"), Place)
}
`,
	"orders/generate.go": `package orders

//go:generate go tool oke extract -o ../api .
`,
	"bad/bad.go": `package bad

import (
	"context"
	"time"

	"github.com/okengine/oke"
)

type Stamp struct {
	At string ` + "`json:\"at\"`" + `
}

var Stamped = oke.NewFlow("bad.stamp", oke.Options{Durable: true},
	func(ctx context.Context, in struct{}, fx *oke.Fx) (oke.Response[Stamp], error) {
		return oke.OK(Stamp{At: time.Now().String()}), nil
	})
`,
}

// The tools work from a user's module (DESIGN.md section 11): in a fresh
// module whose github.com/okengine/oke is this checkout (a replace), `go
// get -tool github.com/okengine/oke/cmd/oke` and `go mod tidy` leave a
// go.mod and go.sum with which `go tool oke extract|vet|gen client` and
// `go generate` (a `//go:generate go tool oke …` line) run and exit as
// documented — with the default -mod=readonly, so a go.sum entry that tidy
// dropped fails here as it would for a user. The clients build: the
// standalone one (linking nothing of the app), the -import-types one, and
// a standalone one written outside the module as a module of its own
// (-module).
//
// No network: GOPROXY=off, so every module comes from the module cache,
// which holds oke's dependencies once this checkout has built them and
// `go mod download` has fetched the go.mod files of its module graph
// (scripts/test runs it). GOSUMDB=off because sum.golang.org cannot be
// asked either; the hashes go records are those of the module cache, which
// this checkout's go.sum verified. The tool is built once (go tool caches
// it); `go mod tidy -e` because tidy also looks at the tests of the
// dependencies' packages, whose modules the cache may not hold.
func TestModuleTool(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command on PATH (go test puts GOROOT/bin there): %v", err)
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "go.mod")); err != nil || !bytes.HasPrefix(b, []byte("module github.com/okengine/oke\n")) {
		t.Fatalf("%s is not oke's checkout: %v", root, err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	if d, ok := t.Deadline(); ok {
		ctx, cancel = context.WithDeadline(context.Background(), d.Add(-15*time.Second))
	}
	defer cancel()

	var env []string
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "GOFLAGS", "GOPROXY", "GOSUMDB", "GONOSUMDB", "GONOPROXY", "GOPRIVATE", "GOWORK", "GOTOOLCHAIN", "GOMOD":
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "GOPROXY=off", "GOSUMDB=off", "GOWORK=off", "GOTOOLCHAIN=local", "GOFLAGS=-buildvcs=false")

	shop := t.TempDir()
	for name, src := range userModule {
		write(t, filepath.Join(shop, name), src)
	}
	// run runs the go command in dir and returns its exit code and output.
	run := func(dir string, args ...string) (int, string) {
		t.Helper()
		cmd := exec.CommandContext(ctx, goBin, args...)
		cmd.Dir, cmd.Env, cmd.WaitDelay = dir, env, 5*time.Second
		out, err := cmd.CombinedOutput()
		if ctx.Err() != nil {
			t.Fatalf("go %s: out of time: %v\n%s", strings.Join(args, " "), ctx.Err(), out)
		}
		code := 0
		if err != nil {
			ee, ok := err.(*exec.ExitError)
			if !ok {
				t.Fatalf("go %s: %v", strings.Join(args, " "), err)
			}
			code = ee.ExitCode()
		}
		return code, string(out)
	}
	must := func(dir string, args ...string) string {
		t.Helper()
		code, out := run(dir, args...)
		if code != 0 {
			hint := ""
			if strings.Contains(out, "GOPROXY=off") {
				hint = "\n(a module is missing from the module cache: run go mod download in the checkout, as scripts/test does)"
			}
			t.Fatalf("go %s (in %s): exit %d\n%s%s", strings.Join(args, " "), dir, code, out, hint)
		}
		return out
	}

	must(shop, "mod", "edit", "-replace", "github.com/okengine/oke="+root)
	must(shop, "get", "-tool", "github.com/okengine/oke/cmd/oke")
	must(shop, "mod", "tidy", "-e")
	if gomod := readFile(t, filepath.Join(shop, "go.mod")); !strings.Contains(gomod, "\ntool github.com/okengine/oke/cmd/oke\n") {
		t.Fatalf("go.mod after go get -tool and go mod tidy:\n%s", gomod)
	}

	// extract: exit 0, the contract, the OpenAPI and the package's file.
	if out := must(shop, "tool", "oke", "extract", "-o", ".", "./orders"); !strings.Contains(out, "oke extract: wrote oke.contract.json") {
		t.Errorf("oke extract said:\n%s", out)
	}
	if c := readFile(t, filepath.Join(shop, "oke.contract.json")); !strings.Contains(c, `"name": "shop.place"`) {
		t.Errorf("oke.contract.json:\n%s", c)
	}
	for _, f := range []string{"openapi.json", "orders/oke_contract_gen.go"} {
		if _, err := os.Stat(filepath.Join(shop, f)); err != nil {
			t.Errorf("oke extract: %v", err)
		}
	}

	// vet: exit 0 on a clean package, 1 with the finding on one that is not.
	if code, out := run(shop, "tool", "oke", "vet", "./orders"); code != 0 {
		t.Errorf("oke vet ./orders: exit %d, want 0\n%s", code, out)
	}
	if code, out := run(shop, "tool", "oke", "vet", "./bad"); code != 1 || !strings.Contains(out, "bad.go:") || !strings.Contains(out, "time.Now outside a step") {
		t.Errorf("oke vet ./bad: exit %d, want 1 with the finding\n%s", code, out)
	}

	// gen client, in the module: a standalone client the module builds,
	// which links nothing of the app.
	if out := must(shop, "tool", "oke", "gen", "client", "-o", "./shopclient", "./orders"); !strings.Contains(out, "oke gen client: wrote shopclient/oke_client_gen.go") {
		t.Errorf("oke gen client said:\n%s", out)
	}
	if src := readFile(t, filepath.Join(shop, "shopclient", "oke_client_gen.go")); !strings.Contains(src, "func (f *ShopFlows) Place(ctx context.Context, in PlaceIn, ") {
		t.Errorf("the client has no Shop.Place method:\n%s", src)
	}
	must(shop, "build", "./...")
	if deps := must(shop, "list", "-deps", "./shopclient"); strings.Contains(deps, "example.com/shop/orders") || !strings.Contains(deps, "github.com/okengine/oke/client") {
		t.Errorf("the standalone client's dependencies:\n%s", deps)
	}

	// -import-types: the app's own types, so the client depends on them.
	must(shop, "tool", "oke", "gen", "client", "-import-types", "-o", "./shopimported", "./orders")
	if src := readFile(t, filepath.Join(shop, "shopimported", "oke_client_gen.go")); !strings.Contains(src, "in orders.PlaceIn, ") {
		t.Errorf("the -import-types client does not take orders.PlaceIn:\n%s", src)
	}
	must(shop, "build", "./shopimported")
	if deps := must(shop, "list", "-deps", "./shopimported"); !strings.Contains(deps, "example.com/shop/orders") {
		t.Errorf("the -import-types client's dependencies:\n%s", deps)
	}

	// gen client outside the module: a module of its own, which builds
	// once go mod tidy has filled in its requirements.
	api := filepath.Join(t.TempDir(), "shopapi")
	if out := must(shop, "tool", "oke", "gen", "client", "-o", api, "-module", "example.com/shopapi", "./orders"); !strings.Contains(out, "go.mod (module example.com/shopapi); run go mod tidy in ") {
		t.Errorf("oke gen client -module said:\n%s", out)
	}
	must(api, "mod", "edit", "-replace", "github.com/okengine/oke="+root)
	must(api, "mod", "tidy", "-e")
	must(api, "build", "./...")
	if deps := must(api, "list", "-deps", "."); strings.Contains(deps, "example.com/shop/orders") || !strings.Contains(deps, "github.com/okengine/oke/client") {
		t.Errorf("the client module's dependencies:\n%s", deps)
	}

	// go generate: the //go:generate go tool oke extract line writes the
	// contract into ../api and the package's file again.
	if err := os.Remove(filepath.Join(shop, "orders", "oke_contract_gen.go")); err != nil {
		t.Fatal(err)
	}
	must(shop, "generate", "./orders")
	for _, f := range []string{"api/oke.contract.json", "api/openapi.json", "orders/oke_contract_gen.go"} {
		if _, err := os.Stat(filepath.Join(shop, f)); err != nil {
			t.Errorf("go generate: %v", err)
		}
	}
}

func write(t *testing.T, name, src string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
