package cli_test

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

// vetFinding is one element of oke vet -json.
type vetFinding struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Col     int    `json:"col"`
	Rule    string `json:"rule"`
	Message string `json:"message"`
}

const badFixture = "internal/cli/testdata/vet/bad/bad.go"

// TestVet: oke vet exits 0 on the demo, 1 with FILE:LINE:COL: message on
// stderr (or a JSON array on stdout with -json) for findings, and 2 for
// usage and load errors. It runs from the module's root, like a user.
func TestVet(t *testing.T) {
	t.Chdir("../..")

	t.Run("the demo passes", func(t *testing.T) {
		code, stdout, stderr := run("vet", "./examples/payments/...")
		if code != 0 || stdout != "" || stderr != "" {
			t.Fatalf("exit %d, want 0 and no output\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
	})

	t.Run("findings exit 1 as FILE:LINE:COL: message", func(t *testing.T) {
		code, stdout, stderr := run("vet", "./internal/cli/testdata/vet/bad")
		if code != 1 || stdout != "" {
			t.Fatalf("exit %d, want 1 and nothing on stdout\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
		want := []string{
			badFixture + `:17:9: time.Now outside a step in durable flow "bad.checkout": the value changes on every pick-up; draw it in oke.Step(ctx, "now", …)`,
			badFixture + `:18:30: step name of oke.Step in durable flow "bad.checkout" comes from time.Now (bad.go:17): it differs on every pick-up, so the run never finds the step it saved and runs it again; name the step with a constant, the input, or a loop index over a slice`,
			badFixture + `:23:13: fx.Emit outside a step in durable flow "bad.checkout": it emits the event again on every pick-up, and each emit starts new runs of the flows bound with oke.OnEvent; move it into oke.Step(ctx, "name", …), where its runs start exactly once`,
		}
		if got := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n"); !equal(got, want) {
			t.Fatalf("stderr:\n%s\nwant:\n%s", stderr, strings.Join(want, "\n"))
		}
	})

	t.Run("-json prints the findings with their rules", func(t *testing.T) {
		code, stdout, stderr := run("vet", "-json", "./internal/cli/testdata/vet/bad")
		if code != 1 || stderr != "" {
			t.Fatalf("exit %d, want 1 and nothing on stderr\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
		var got []vetFinding
		if err := json.Unmarshal([]byte(stdout), &got); err != nil {
			t.Fatalf("stdout is not a JSON array of findings: %v\n%s", err, stdout)
		}
		want := []struct {
			line, col int
			rule      string
		}{{17, 9, "nondetoutsidestep"}, {18, 30, "nondetstepname"}, {23, 13, "effectoutsidestep"}}
		if len(got) != len(want) {
			t.Fatalf("%d findings, want %d:\n%s", len(got), len(want), stdout)
		}
		for i, w := range want {
			g := got[i]
			if g.File != badFixture || g.Line != w.line || g.Col != w.col || g.Rule != w.rule || g.Message == "" {
				t.Errorf("finding %d = %+v, want %s:%d:%d rule %s with a message", i, g, badFixture, w.line, w.col, w.rule)
			}
		}
	})

	t.Run("-json with no findings is an empty array", func(t *testing.T) {
		code, stdout, stderr := run("vet", "-json", "./examples/payments/app")
		if code != 0 || strings.TrimSpace(stdout) != "[]" {
			t.Fatalf("exit %d, stdout %q, stderr %q; want 0 and []", code, stdout, stderr)
		}
	})

	t.Run("test files are checked unless -tests=false, and each finding is printed once", func(t *testing.T) {
		const dir = "internal/cli/testdata/vet/withtests/"
		code, _, stderr := run("vet", "./"+dir)
		if code != 1 || !strings.HasPrefix(stderr, dir+"flow.go:15:") || strings.Count(stderr, "flow.go:15:") != 1 ||
			!strings.Contains(stderr, dir+"flow_test.go:13:") || strings.Count(stderr, "\n") != 2 {
			t.Fatalf("exit %d, stderr:\n%s\nwant 1 and one finding in flow.go, one in flow_test.go", code, stderr)
		}
		code, _, stderr = run("vet", "-tests=false", "./"+dir)
		if code != 1 || strings.Contains(stderr, "flow_test.go") || strings.Count(stderr, "\n") != 1 {
			t.Fatalf("-tests=false: exit %d, stderr:\n%s\nwant 1 and only the finding in flow.go", code, stderr)
		}
	})

	t.Run("helpers of other packages are followed", func(t *testing.T) {
		const dir = "internal/cli/testdata/vet/reach/"
		code, _, stderr := run("vet", "./"+dir)
		want := dir + `flow.go:17:25: call of clock.Stamp outside a step in durable flow "reach.flow" reaches time.Now at clock.go:7 (through clock.Stamp → clock.now): the value changes on every pick-up;`
		if code != 1 || !strings.HasPrefix(stderr, want) || strings.Count(stderr, "\n") != 1 {
			t.Fatalf("exit %d, stderr:\n%s\nwant 1 and one finding:\n%s", code, stderr, want)
		}
	})

	for _, tc := range []struct {
		name   string
		args   []string
		stderr *regexp.Regexp
	}{
		{"a bad flag exits 2", []string{"vet", "-nope"}, regexp.MustCompile(`flag provided but not defined: -nope`)},
		{"a pattern that matches nothing exits 2", []string{"vet", "./no/such/dir/..."}, regexp.MustCompile(`^oke vet: the packages do not load:\n.*no/such/dir`)},
		{"a package that does not type-check exits 2", []string{"vet", "./internal/cli/testdata/vet/broken"}, regexp.MustCompile(`(?s)^oke vet: the packages do not load:\n.*broken.go:5:13: cannot use "not an int".*run oke vet again\n$`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := run(tc.args...)
			if code != 2 || !tc.stderr.MatchString(stderr) {
				t.Fatalf("exit %d, stderr %q; want 2 and %s", code, stderr, tc.stderr)
			}
		})
	}

	t.Run("help vet", func(t *testing.T) {
		code, stdout, _ := run("help", "vet")
		if code != 0 || !strings.Contains(stdout, "Usage: oke vet [-json] [-tests=false] [PACKAGES]") {
			t.Fatalf("exit %d, stdout:\n%s", code, stdout)
		}
	})
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
