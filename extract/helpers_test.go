package extract_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/okengine/oke/extract"
)

// results caches one extract run per fixture directory and pattern.
var results sync.Map

type cached struct {
	once sync.Once
	res  *extract.Result
	err  error
}

// fixturePatterns are the fixture packages of this module, extracted
// together (once per test binary: loading is most of the cost).
var fixturePatterns = []string{"./testdata/flows", "./testdata/rules/ttl", "./testdata/rules/required",
	"./testdata/rules/effects", "./testdata/rules/steps", "./testdata/rules/runtime", "./testdata/rules/name", "./testdata/rules/tag", "./testdata/answers", "./testdata/patches"}

// run returns the diagnostics, warnings and flows of one fixture package.
func run(t *testing.T, pattern string) *extract.Result {
	t.Helper()
	all := runIn(t, "", strings.Join(fixturePatterns, " "))
	dir := "extract/" + strings.TrimPrefix(pattern, "./") + "/"
	res := &extract.Result{Contract: extract.Contract{Version: 1}}
	for _, d := range all.Diagnostics {
		if strings.HasPrefix(d.File, dir) {
			res.Diagnostics = append(res.Diagnostics, d)
		}
	}
	for _, d := range all.Warnings {
		if strings.HasPrefix(d.File, dir) {
			res.Warnings = append(res.Warnings, d)
		}
	}
	for _, f := range all.Contract.Flows {
		if strings.HasPrefix(f.Source, dir) {
			res.Contract.Flows = append(res.Contract.Flows, f)
		}
	}
	return res
}

// runIn is run from dir.
func runIn(t *testing.T, dir, pattern string) *extract.Result {
	t.Helper()
	v, _ := results.LoadOrStore(dir+"\x00"+pattern, &cached{})
	c := v.(*cached)
	c.once.Do(func() { c.res, c.err = extract.Run(extract.Config{Dir: dir, Patterns: strings.Fields(pattern)}) })
	if c.err != nil {
		t.Fatalf("extract %s: %v", pattern, c.err)
	}
	return c.res
}

func flowNamed(t *testing.T, res *extract.Result, name string) extract.Flow {
	t.Helper()
	for _, f := range res.Contract.Flows {
		if f.Name == name {
			return f
		}
	}
	var names []string
	for _, f := range res.Contract.Flows {
		names = append(names, f.Name)
	}
	t.Fatalf("no flow %q; flows: %s", name, strings.Join(names, ", "))
	return extract.Flow{}
}

func jsonString(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}

// moduleRoot is the repository root (the module of the demo).
func moduleRoot(t *testing.T) string {
	t.Helper()
	abs, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(abs, "go.mod")); err != nil {
		t.Fatal(err)
	}
	return abs
}
