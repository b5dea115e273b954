// Package modtest writes a throwaway Go module that requires this checkout
// of oke (through a replace directive), for tests that run oke's tools on a
// user's module rather than on oke's own.
package modtest

import (
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// Path is the module path of the modules New writes.
const Path = "example.com/shop"

// Root returns the directory of this checkout of oke (its go.mod's).
func Root(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("modtest: no caller information")
	}
	return filepath.Dir(filepath.Dir(filepath.Dir(file)))
}

var requireBlock = regexp.MustCompile(`(?ms)^require \(.*?^\)`)

// New writes a module Path in a temporary directory with files (names
// relative to it) and returns the directory. Its go.mod requires oke, with a
// replace directive pointing at Root, and every module oke requires (at
// oke's versions; its go.sum is oke's), so the go command resolves the
// build offline from the module cache oke's own build filled.
func New(t testing.TB, files map[string]string) string {
	t.Helper()
	root := Root(t)
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	goVersion := regexp.MustCompile(`(?m)^go (\S+)`).FindSubmatch(mod)
	if goVersion == nil {
		t.Fatal("modtest: oke's go.mod has no go line")
	}
	var b strings.Builder
	b.WriteString("module " + Path + "\n\ngo " + string(goVersion[1]) + "\n\nrequire github.com/okengine/oke v0.0.0\n\n")
	for _, r := range requireBlock.FindAll(mod, -1) {
		b.Write(r)
		b.WriteString("\n\n")
	}
	b.WriteString("replace github.com/okengine/oke => " + root + "\n")
	dir := t.TempDir()
	Write(t, dir, map[string]string{"go.mod": b.String(), "go.sum": string(sum)})
	Write(t, dir, files)
	return dir
}

// Write writes files (names relative to dir) into dir.
func Write(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, src := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
