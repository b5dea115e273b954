package extract_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/okengine/oke"
	"github.com/okengine/oke/extract"
	"github.com/okengine/oke/extract/testdata/hidden"
)

// The fail-safe corpus (testdata/hidden): every flow that changes the world
// without fx, and the reads that do not. want is a piece of the flow's raw
// why: the call extract found.
var hiddenEffects = []struct {
	flow, why string
}{
	{"hidden.defaultClient", "http.DefaultClient.Do ((*net/http.Client).Do)"},
	{"hidden.post", "http.Post (net/http.Post)"},
	{"hidden.sdk", "s.client.Do ((*net/http.Client).Do)"},
	{"hidden.methodValue", "s.client.Do ((*net/http.Client).Do)"},
	{"hidden.goroutine", "http.Post (net/http.Post)"},
	{"hidden.sqlExec", "DB.ExecContext INSERT INTO notes (id) VALUES (?) ((*database/sql.DB).ExecContext)"},
	{"hidden.repo", "r.db.ExecContext INSERT INTO notes (id) VALUES (?) ((*database/sql.DB).ExecContext)"},
	{"hidden.funcVar", "db.ExecContext INSERT INTO notes (id) VALUES (?) ((*database/sql.DB).ExecContext)"},
	{"hidden.runtimeSQL", "DB.ExecContext ((*database/sql.DB).ExecContext) with SQL computed at run time"},
	{"hidden.writeFile", "os.WriteFile (os.WriteFile)"},
	{"hidden.generic", "os.Create (os.Create)"},
	{"hidden.command", "((*os/exec.Cmd).Run)"},
	{"hidden.interface", "http.Post (net/http.Post)"},
	{"hidden.publish", "the interface method hidden.Publisher.Publish has no implementation extract can see"},
	{"hidden.reflect", "((reflect.Value).Call)"},
	{"hidden.socket", "d.DialContext ((*net.Dialer).DialContext)"},
	{"hidden.thirdParty", "github.com/jackc/pgx/v5@v5.12.0/pgconn/pgconn.go"}, // read deep: pgconn dials
}

// hiddenConservative are harmless flows extract cannot prove harmless: they
// honor the header (one stored row each), by the fail-safe rule.
var hiddenConservative = []struct {
	flow, effect, why string
}{
	{"hidden.runtimeSelect", "write", "with SQL computed at run time (counts as a write)"},
	{"hidden.linkname", "raw", "has no Go body (assembly, linkname or cgo)"},
}

var hiddenReads = []struct {
	flow    string
	effects []string
}{
	{"hidden.readStore", []string{"read"}},
	{"hidden.readRaw", []string{"read"}},
	{"hidden.pure", []string{}},
	{"hidden.thirdPartyPure", []string{}}, // another module's code, read deep: pure
}

func hiddenResult(t *testing.T) *extract.Result {
	t.Helper()
	return runIn(t, "", "./testdata/hidden")
}

// TestEffectsOutsideFxAreRaw: each hidden effect comes out as raw, its
// POST honors the header, its why names the call, and extract warns about
// it (rule effect-outside-fx, severity warning) without failing.
func TestEffectsOutsideFxAreRaw(t *testing.T) {
	res := hiddenResult(t)
	if len(res.Diagnostics) > 0 {
		t.Fatalf("diagnostics: %v", res.Diagnostics)
	}
	for _, c := range hiddenEffects {
		t.Run(c.flow, func(t *testing.T) {
			f := findFlow(t, res, c.flow)
			if !contains(f.Effects, "raw") {
				t.Fatalf("effects %q, want raw among them", f.Effects)
			}
			if len(f.Bindings) != 1 || !f.Bindings[0].Honored {
				t.Errorf("bindings %+v, want the POST honored", f.Bindings)
			}
			if !anyContains(f.Why["raw"], c.why) {
				t.Errorf("why raw %q, want one naming %q", f.Why["raw"], c.why)
			}
			var warned []extract.Diagnostic
			for _, w := range res.Warnings {
				if w.Flow == c.flow && w.Rule == extract.RuleOutsideFx {
					warned = append(warned, w)
				}
			}
			if len(warned) == 0 {
				t.Fatalf("no %s warning for %s; warnings: %v", extract.RuleOutsideFx, c.flow, res.Warnings)
			}
			for _, w := range warned {
				if w.Severity != extract.SeverityWarning || !strings.HasPrefix(w.File, "extract/testdata/hidden/") || w.Line == 0 ||
					!strings.Contains(w.Message, "fix: ") || !strings.Contains(w.Message, "honors Idempotency-Key") {
					t.Errorf("warning %+v: want a warning at a line of the corpus that names the fix", w)
				}
			}
		})
	}
	for _, c := range hiddenConservative {
		t.Run(c.flow, func(t *testing.T) {
			f := findFlow(t, res, c.flow)
			if !contains(f.Effects, c.effect) || !anyContains(f.Why[c.effect], c.why) || !f.Bindings[0].Honored {
				t.Errorf("effects %q why %v honored %v: want %s (%q), honored", f.Effects, f.Why, f.Bindings[0].Honored, c.effect, c.why)
			}
		})
	}
	for _, c := range hiddenReads {
		t.Run(c.flow, func(t *testing.T) {
			f := findFlow(t, res, c.flow)
			if strings.Join(f.Effects, ",") != strings.Join(c.effects, ",") {
				t.Errorf("effects %q, want %q (why %v)", f.Effects, c.effects, f.Why)
			}
			if len(f.Bindings) != 1 || f.Bindings[0].Honored {
				t.Errorf("bindings %+v, want the POST not honored: the flow only reads", f.Bindings)
			}
			for _, w := range res.Warnings {
				if w.Flow == c.flow {
					t.Errorf("warning %v on a flow that only reads", w)
				}
			}
		})
	}
}

// TestHiddenEffectsRunOnce sends one key twice to each flow of the corpus
// through a real App that uses the contract extract inferred: each hidden
// effect happens once (the second request replays), and a read-only flow
// ignores the header (both requests run).
func TestHiddenEffectsRunOnce(t *testing.T) {
	res := hiddenResult(t)

	var hits atomic.Int64
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer provider.Close()
	dir := t.TempDir()
	db, err := sql.Open("sqlite", filepath.Join(dir, "notes.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE TABLE notes (id TEXT)`); err != nil {
		t.Fatal(err)
	}
	files := filepath.Join(dir, "files")
	if err := os.Mkdir(files, 0o755); err != nil {
		t.Fatal(err)
	}
	var published atomic.Int64
	hidden.Provider, hidden.DB, hidden.Dir, hidden.Pub = provider.URL, db, files, countPublisher{&published}
	hidden.Init()
	hidden.Wire()
	world := func() int64 {
		var rows int64
		if err := db.QueryRow(`SELECT count(*) FROM notes`).Scan(&rows); err != nil {
			t.Fatal(err)
		}
		entries, err := os.ReadDir(files)
		if err != nil {
			t.Fatal(err)
		}
		return hits.Load() + rows + int64(len(entries)) + published.Load()
	}

	oke.RegisterContract(okeContract(res, "extract/testdata/hidden/"))
	app := oke.New(oke.Config{})
	hidden.Bind(app)
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer app.Close(context.Background())
	srv := httptest.NewServer(app)
	defer srv.Close()

	post := func(path, key string) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(`{"id":"n1"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		_, _ = fmt.Fprint(&b, resp.StatusCode)
		return resp, b.String()
	}
	for i, c := range hiddenEffects {
		if c.flow == "hidden.thirdParty" {
			continue // it needs a Postgres server; its contract is checked above
		}
		t.Run(c.flow, func(t *testing.T) {
			path := "/" + strings.TrimPrefix(c.flow, "hidden.")
			key := fmt.Sprintf("hidden-effect-key-%03d", i)
			before := world()
			first, status := post(path, key)
			if first.StatusCode != http.StatusCreated {
				t.Fatalf("first request: %s, want 201", status)
			}
			once := world()
			if once-before != 1 {
				t.Fatalf("the first request changed the world %d times, want 1", once-before)
			}
			second, status := post(path, key)
			if second.StatusCode != http.StatusCreated || second.Header.Get("Idempotent-Replayed") != "true" {
				t.Errorf("retry: %s replayed=%q, want the stored 201 replayed", status, second.Header.Get("Idempotent-Replayed"))
			}
			if got := world() - once; got != 0 {
				t.Errorf("the retry with the same key ran the effect again (%d more), want once in all", got)
			}
		})
	}
	for i, c := range hiddenReads {
		t.Run(c.flow, func(t *testing.T) {
			path := "/" + strings.TrimPrefix(c.flow, "hidden.")
			key := fmt.Sprintf("hidden-read-key-%03d", i)
			for n := 0; n < 2; n++ {
				resp, status := post(path, key)
				if resp.StatusCode != http.StatusOK || resp.Header.Get("Idempotent-Replayed") != "" {
					t.Errorf("request %d: %s replayed=%q, want a live 200: a flow that only reads ignores the header",
						n+1, status, resp.Header.Get("Idempotent-Replayed"))
				}
			}
		})
	}
}

type countPublisher struct{ n *atomic.Int64 }

func (p countPublisher) Publish(string, []byte) error { p.n.Add(1); return nil }

// okeContract is what oke_contract_gen.go would register for the flows of
// res whose source is under dir: options as written (no TTL, no claim).
func okeContract(res *extract.Result, dir string) oke.Contract {
	c := oke.Contract{Version: 1}
	for _, f := range res.Contract.Flows {
		if !strings.HasPrefix(f.Source, dir) {
			continue
		}
		cf := oke.ContractFlow{Name: f.Name, Source: f.Source, Shape: f.Shape, Durable: f.Durable,
			Idempotency: oke.ContractIdempotency{Mode: f.Idempotency.Mode}, TxOnly: f.TxOnly, Effects: []oke.Effect{}}
		for _, e := range f.Effects {
			cf.Effects = append(cf.Effects, oke.Effect(e))
		}
		for _, b := range f.Bindings {
			cf.Bindings = append(cf.Bindings, oke.ContractBinding{Kind: b.Kind, Method: b.Method, Path: b.Path, Event: b.Event, Dedupe: b.Dedupe})
		}
		c.Flows = append(c.Flows, cf)
	}
	return c
}

func findFlow(t *testing.T, res *extract.Result, name string) extract.Flow {
	t.Helper()
	for _, f := range res.Contract.Flows {
		if f.Name == name {
			return f
		}
	}
	t.Fatalf("no flow %s in %d flows", name, len(res.Contract.Flows))
	return extract.Flow{}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func anyContains(ss []string, sub string) bool {
	for _, x := range ss {
		if strings.Contains(x, sub) {
			return true
		}
	}
	return false
}
