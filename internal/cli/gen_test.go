package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/okengine/oke/extract/clientgen"
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

// oke gen client writes the client, gofmt'ed and vet-clean, and says so.
func TestGenClientWrites(t *testing.T) {
	dir := genDir(t)
	code, stdout, stderr := run("gen", "client", "-o", dir, "-pkg", "shopapi", shopFixture)
	if code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", code, stderr)
	}
	name := filepath.Join(dir, clientgen.FileName)
	src, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(src), clientgen.Header+"\n") || !strings.Contains(string(src), "\npackage shopapi\n") ||
		!strings.Contains(string(src), "func (f *ShopFlows) Create(ctx context.Context, in shop.CreateIn, opts ...client.CallOption) (shop.Item, client.Meta, error)") {
		t.Errorf("generated:\n%s", src)
	}
	if stdout != "" || !strings.Contains(stderr, "oke gen client: wrote ") || !strings.HasSuffix(stderr, clientgen.FileName+"\n") {
		t.Errorf("stdout %q, stderr %q", stdout, stderr)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("the directory holds %v, want the one file", ents)
	}
	vet := exec.Command("go", "vet", "./"+filepath.ToSlash(dir))
	if out, err := vet.CombinedOutput(); err != nil {
		t.Fatalf("go vet: %v\n%s", err, out)
	}
	if out, err := exec.Command("gofmt", "-l", name).CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("gofmt -l: %s %v", out, err)
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
		{"-o outside a module", []string{"gen", "client", "-o", t.TempDir(), "-pkg", "x", shopFixture}, 2, "is not inside a Go module"},
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
	if code != 0 || !strings.Contains(stderr, "Usage: oke gen client -o DIR [-pkg NAME] [-copy-types] [PACKAGES]") || !strings.Contains(stderr, "//go:generate go run github.com/okengine/oke/cmd/oke gen client") {
		t.Errorf("gen client -h: exit %d\n%s", code, stderr)
	}
}
