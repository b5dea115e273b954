package main_test

import (
	"bytes"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/okengine/oke/extract"
	"github.com/okengine/oke/internal/modtest"
)

// vettool builds oke-vet into a temporary directory.
func vettool(t *testing.T) (goCmd, bin string) {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build oke-vet and run go vet: %v", err)
	}
	bin = filepath.Join(t.TempDir(), "oke-vet")
	if out, err := exec.Command(goCmd, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return goCmd, bin
}

// goVet runs go vet -vettool=bin on pattern from the module's root and
// returns its exit code and output.
func goVet(t *testing.T, goCmd, bin, pattern string) (int, string) {
	t.Helper()
	cmd := exec.Command(goCmd, "vet", "-vettool="+bin, pattern)
	cmd.Dir = filepath.Join("..", "..")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String()
	}
	t.Fatalf("go vet: %v\n%s", err, out.String())
	return 0, ""
}

// TestGoVetTool: oke-vet works as go vet -vettool; the demo's durable flows
// pass, and a flow that breaks every rule gets one diagnostic per problem,
// as FILE:LINE:COL: message.
func TestGoVetTool(t *testing.T) {
	goCmd, bin := vettool(t)

	t.Run("the demo passes", func(t *testing.T) {
		code, out := goVet(t, goCmd, bin, "./examples/payments/...")
		if code != 0 || out != "" {
			t.Fatalf("go vet -vettool on the demo: exit %d, want 0 and no output:\n%s", code, out)
		}
	})

	t.Run("a bad flow is reported", func(t *testing.T) {
		code, out := goVet(t, goCmd, bin, "./cmd/oke-vet/testdata/bad")
		if code == 0 {
			t.Fatalf("go vet -vettool on testdata/bad: exit 0, want non-zero:\n%s", out)
		}
		want := []string{
			`bad.go:16:13: fx.Emit outside a step in durable flow "bad.flow": it emits the event again on every pick-up`,
			`bad.go:19:14: time.Now outside a step in durable flow "bad.flow": the value changes on every pick-up; draw it in oke.Step(ctx, "now", …)`,
			`bad.go:21:31: step name of oke.Step in durable flow "bad.flow" comes from the order of a range over a map (bad.go:20)`,
			`bad.go:25:3: goroutine in durable flow "bad.flow" uses fx, and nothing waits for it before the function returns`,
			`bad.go:25:6: fx.Emit outside a step`,
			`bad.go:25:31: time.Since outside a step`,
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("go vet output lacks %q", w)
			}
		}
		if n := strings.Count(out, "bad.go:"); n != len(want)+1 { // +1: the map range's position in a message
			t.Errorf("go vet printed %d positions in bad.go, want %d", n, len(want)+1)
		}
		if t.Failed() {
			t.Logf("output:\n%s", out)
		}
	})

	// stalecontract runs extract from inside go vet (go/packages runs the
	// go command) on a user's module whose code changed since its
	// oke_contract_gen.go was written.
	t.Run("a stale contract is reported", func(t *testing.T) {
		src := `package shop

//go:generate go tool oke extract -o .. .

import (
	"context"
	"database/sql"

	"github.com/okengine/oke"
)

type In struct {
	Item string ` + "`json:\"item\"`" + `
}

func Register(app *oke.App, db *sql.DB) {
	app.Handle(oke.POST("/orders"), oke.NewFlow("shop.order", oke.Options{}, func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[In], error) {
		_, err := fx.Store(db).Exec(ctx, "UPDATE orders SET seen = true WHERE item = $1", in.Item)
		return oke.OK(in), err
	}))
}
`
		dir := modtest.New(t, map[string]string{"shop/shop.go": src})
		res, err := extract.Run(extract.Config{Dir: dir, Patterns: []string{"./shop"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := res.Write(dir); err != nil {
			t.Fatal(err)
		}
		vet := func() (string, error) {
			cmd := exec.Command(goCmd, "vet", "-vettool="+bin, "./shop")
			cmd.Dir = dir
			out, err := cmd.CombinedOutput()
			return string(out), err
		}
		if out, err := vet(); err != nil {
			t.Fatalf("go vet on the fresh contract: %v\n%s", err, out)
		}
		modtest.Write(t, dir, map[string]string{"shop/shop.go": strings.Replace(src, "seen = true", "seen = false", 1)})
		out, err := vet()
		if err == nil || !strings.Contains(out, `shop.go:17:34: flow "shop.order": its contract in oke_contract_gen.go is stale`) {
			t.Errorf("go vet on the stale contract: %v, output:\n%s", err, out)
		}
	})

	t.Run("helpers of other packages are followed through facts", func(t *testing.T) {
		code, out := goVet(t, goCmd, bin, "./internal/cli/testdata/vet/reach")
		want := `flow.go:17:25: call of clock.Stamp outside a step in durable flow "reach.flow" reaches time.Now at clock.go:7 (through clock.Stamp → clock.now)`
		if code == 0 || !strings.Contains(out, want) || strings.Count(out, "flow.go:") != 1 {
			t.Fatalf("go vet -vettool on internal/cli/testdata/vet/reach: exit %d, want non-zero and one finding %q:\n%s", code, want, out)
		}
	})

	t.Run("an analyzer can be turned off", func(t *testing.T) {
		cmd := exec.Command(goCmd, "vet", "-vettool="+bin, "-fxgoroutine=false", "-effectoutsidestep=false",
			"-nondetoutsidestep=false", "-nondetstepname=false", "-nondetreach=false", "-rawio=false",
			"-selectchoice=false", "-maporder=false", "./cmd/oke-vet/testdata/bad")
		cmd.Dir = filepath.Join("..", "..")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go vet with every rule off: %v\n%s", err, out)
		}
	})
}
