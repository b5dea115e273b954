package docstest

import (
	"context"
	"fmt"
	"go/parser"
	"go/scanner"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/okengine/oke/internal/modtest"
)

// imports maps the package names a fragment may use to their import paths.
var imports = map[string]string{
	"admin":          "github.com/okengine/oke/admin",
	"bytes":          "bytes",
	"client":         "github.com/okengine/oke/client",
	"context":        "context",
	"driver":         "github.com/okengine/oke/driver",
	"errors":         "errors",
	"file":           "github.com/okengine/oke/driver/file",
	"fmt":            "fmt",
	"http":           "net/http",
	"io":             "io",
	"json":           "encoding/json",
	"log":            "log",
	"maps":           "maps",
	"memory":         "github.com/okengine/oke/driver/memory",
	"oke":            "github.com/okengine/oke",
	"oketest":        "github.com/okengine/oke/oketest",
	"os":             "os",
	"paymentsclient": "github.com/okengine/oke/examples/payments/paymentsclient",
	"rand":           "crypto/rand",
	"postgres":       "github.com/okengine/oke/driver/postgres",
	"slices":         "slices",
	"slog":           "log/slog",
	"sql":            "database/sql",
	"strings":        "strings",
	"sync":           "sync",
	"testing":        "testing",
	"time":           "time",
	"uuid":           "github.com/google/uuid",
}

// A block is one fenced block of a doc.
type block struct {
	doc   string // path relative to the checkout
	line  int    // of the opening fence
	lang  string
	src   string
	skip  string // the reason of a docs:skip marker before it
	run   bool   // a docs:run marker before it: a walkthrough run against the demo
	setup string // the Go declarations of the docs:setup comment above it
}

func (b block) String() string { return fmt.Sprintf("%s:%d", b.doc, b.line) }

var (
	skipMarker = regexp.MustCompile(`^<!--\s*docs:skip\s+(.+?)\s*-->\s*$`)
	runMarker  = regexp.MustCompile(`^<!--\s*docs:run\s*-->\s*$`)
)

// docs returns README.md and docs/*.md of the checkout at root.
func docs(t *testing.T, root string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	names = append([]string{filepath.Join(root, "README.md")}, names...)
	for i, n := range names {
		names[i], _ = filepath.Rel(root, n)
	}
	return names
}

// parse returns the fenced blocks of a markdown text. A docs:setup comment
// applies to the blocks after it, up to the next one.
func parse(doc, text string) (blocks []block, err error) {
	lines := strings.Split(text, "\n")
	setup := ""
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.TrimSpace(l) == "<!-- docs:setup" {
			start := i + 1
			for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "-->"; i++ {
			}
			if i == len(lines) {
				return nil, fmt.Errorf("%s:%d: a docs:setup comment with no --> line", doc, start)
			}
			setup = strings.Join(lines[start:i], "\n") + "\n"
			continue
		}
		if !strings.HasPrefix(l, "```") || len(l) == 3 {
			continue
		}
		b := block{doc: doc, line: i + 1, lang: strings.Fields(l[3:])[0], setup: setup}
		for j := i - 1; j >= 0 && strings.TrimSpace(lines[j]) != ""; j-- {
			if m := skipMarker.FindStringSubmatch(lines[j]); m != nil {
				b.skip = m[1]
			}
			if runMarker.MatchString(lines[j]) {
				b.run = true
			}
		}
		var body []string
		for i++; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
			body = append(body, lines[i])
		}
		if i == len(lines) {
			return nil, fmt.Errorf("%s:%d: a ``` block that is never closed", doc, b.line)
		}
		b.src = strings.Join(body, "\n") + "\n"
		blocks = append(blocks, b)
	}
	return blocks, nil
}

// qualifiers returns the import declarations src needs: the names of
// imports it uses as pkg.Name.
func qualifiers(src string) string {
	var s scanner.Scanner
	fs := token.NewFileSet()
	s.Init(fs.AddFile("", -1, len(src)), []byte(src), func(token.Position, string) {}, 0)
	used := map[string]bool{}
	var prev, prev2 string
	for {
		_, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		cur := lit
		if tok == token.PERIOD {
			cur = "."
		}
		if tok == token.IDENT && prev == "." && prev2 != "" && imports[prev2] != "" {
			used[prev2] = true
		}
		if tok != token.IDENT && tok != token.PERIOD {
			cur = "#"
		}
		prev2, prev = prev, cur
		if tok == token.IDENT && prev2 == "." {
			prev2 = "#" // a.b.c: b is a selector, not a package
		}
	}
	var names []string
	for n := range used {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "import %s %q\n", n, imports[n])
	}
	return b.String()
}

var (
	returnsResponse = regexp.MustCompile(`return (oke\.Response\[[^\]]+\])\{\}, `)
	returnsOK       = regexp.MustCompile(`(?m)^\s*return oke\.(?:OK|Created|Accepted)\((\w+)\{`)
	returnsErr      = regexp.MustCompile(`(?m)^\s*return err\s*(//.*)?$`)
)

// goFile returns the Go file a block is built as, and its package's name.
func goFile(src string) string {
	if strings.HasPrefix(strings.TrimLeft(stripComments(src), " \t\n"), "package ") {
		return src
	}
	file := "package snippet\n\n" + qualifiers(src) + "\n"
	if _, err := parser.ParseFile(token.NewFileSet(), "", file+src, parser.SkipObjectResolution); err == nil {
		return file + src
	}
	results := ""
	if m := returnsResponse.FindStringSubmatch(src); m != nil {
		results = "(" + m[1] + ", error) "
	} else if m := returnsOK.FindStringSubmatch(src); m != nil {
		results = "(oke.Response[" + m[1] + "], error) "
	} else if returnsErr.MatchString(src) {
		results = "error "
	}
	return file + "func _() " + results + "{\n" + src + "\npanic(\"the end of a docs fragment\")\n}\n"
}

func stripComments(src string) string {
	var b strings.Builder
	for _, l := range strings.Split(src, "\n") {
		if t := strings.TrimSpace(l); strings.HasPrefix(t, "//") || t == "" {
			continue
		}
		b.WriteString(l + "\n")
	}
	return b.String()
}

// goEnv is the environment the go command runs a throwaway module in:
// offline, from the module cache oke's own build filled.
func goEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "GOFLAGS", "GOPROXY", "GOSUMDB", "GONOSUMDB", "GONOPROXY", "GOPRIVATE", "GOWORK", "GOTOOLCHAIN", "GOMOD":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "GOPROXY=off", "GOSUMDB=off", "GOWORK=off", "GOTOOLCHAIN=local", "GOFLAGS=-mod=mod -buildvcs=false")
}

var (
	errorLine = regexp.MustCompile(`(?m)^(?:\./)?(b\d+)/[^:\s]+\.go:\d+:\d+: (.*)$`)
	unused    = regexp.MustCompile(`^declared and not used: `)
)

// buildGo builds blocks (each with its doc's setups) in a throwaway module
// and returns, per block that does not compile, the compiler's errors.
func buildGo(t *testing.T, blocks []block) map[int][]string {
	t.Helper()
	files := map[string]string{}
	for i, b := range blocks {
		dir := fmt.Sprintf("b%d/", i)
		files[dir+"snippet.go"] = goFile(b.src)
		if b.setup != "" && strings.HasPrefix(files[dir+"snippet.go"], "package snippet") {
			files[dir+"setup.go"] = "package snippet\n\n" + qualifiers(b.setup) + "\n" + b.setup
		}
	}
	mod := modtest.New(t, files)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-gcflags=-e", "./...")
	cmd.Dir, cmd.Env, cmd.WaitDelay = mod, goEnv(), 5*time.Second
	out, err := cmd.CombinedOutput()
	failed := map[int][]string{}
	for _, m := range errorLine.FindAllStringSubmatch(string(out), -1) {
		if unused.MatchString(m[2]) {
			continue // an excerpt may declare what it does not use again
		}
		var i int
		fmt.Sscanf(m[1], "b%d", &i)
		failed[i] = append(failed[i], m[2])
	}
	if err != nil && len(failed) == 0 && !onlyUnused(string(out)) {
		t.Fatalf("go build in the docs' module (%s): %v\n%s", mod, err, out)
	}
	return failed
}

// onlyUnused reports whether every error of a go build's output is an
// unused variable's.
func onlyUnused(out string) bool {
	for _, l := range strings.Split(out, "\n") {
		if l == "" || strings.HasPrefix(l, "# ") {
			continue
		}
		m := errorLine.FindStringSubmatch(l)
		if m == nil || !unused.MatchString(m[2]) {
			return false
		}
	}
	return true
}

// TestGoBlocksBuild builds every ```go block of README.md and docs/*.md.
func TestGoBlocksBuild(t *testing.T) {
	root := modtest.Root(t)
	var gos []block
	skipped := 0
	for _, doc := range docs(t, root) {
		text, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := parse(doc, string(text))
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range blocks {
			if b.lang != "go" {
				continue
			}
			if b.skip != "" {
				skipped++
				t.Logf("%s: skipped: %s", b, b.skip)
				continue
			}
			gos = append(gos, b)
		}
	}
	failed := buildGo(t, gos)
	for i, b := range gos {
		if errs := failed[i]; len(errs) > 0 {
			t.Errorf("%s: the ```go block does not compile (fix it, or mark it <!-- docs:skip REASON -->):\n\t%s\n--- as built:\n%s",
				b, strings.Join(errs, "\n\t"), goFile(b.src))
		}
	}
	t.Logf("Go blocks: %d built, %d skipped (with a reason), %d failing", len(gos), skipped, len(failed))
}
