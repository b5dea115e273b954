package pgtest

import (
	"database/sql"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestDSNEdits(t *testing.T) {
	for _, c := range []struct {
		dsn, db, key, value, wantDB, wantParam string
	}{
		{"postgres://u@h:5432/test?sslmode=disable", "x", "pool_max_conns", "6",
			"postgres://u@h:5432/x?sslmode=disable", "postgres://u@h:5432/test?pool_max_conns=6&sslmode=disable"},
		{"postgresql://u@h/test", "x", "application_name", "a b",
			"postgresql://u@h/x", "postgresql://u@h/test?application_name=a+b"},
		{"postgres://u@h/test?application_name=a&pool_max_conns=9", "x", "application_name", "b",
			"postgres://u@h/x?application_name=a&pool_max_conns=9", "postgres://u@h/test?application_name=b&pool_max_conns=9"},
		{"host=h user=u dbname=test", "x", "pool_max_conns", "6",
			"host=h user=u dbname=test dbname=x", "host=h user=u dbname=test pool_max_conns=6"},
	} {
		got, err := WithDatabase(c.dsn, c.db)
		if err != nil || got != c.wantDB {
			t.Errorf("WithDatabase(%q, %q) = %q, %v; want %q", c.dsn, c.db, got, err, c.wantDB)
		}
		if got := WithParam(c.dsn, c.key, c.value); got != c.wantParam {
			t.Errorf("WithParam(%q, %q, %q) = %q; want %q", c.dsn, c.key, c.value, got, c.wantParam)
		}
	}
	if _, err := WithDatabase("postgres://u@h:bad port/x", "y"); err == nil {
		t.Error("WithDatabase of a malformed URL: nil error")
	}
}

// childEnv names the scenario a child process of TestBudgetRules runs.
const childEnv = "OKE_PGTEST_CHILD"

// TestBudgetRules runs each way a test may use (or misuse) its share of
// the budget in a child process, and checks whether the child's test passes
// and what it says.
func TestBudgetRules(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		return // the child runs TestBudgetChild only
	}
	URL(t) // a server, or fail here rather than in every child
	for _, c := range []struct {
		name  string
		pass  bool
		wants []string
	}{
		{"pool closed before the end", true, nil},
		{"pool left open", false, []string{"the test left connections open on the server", "application_name \"oke-test-"}},
		{"database with a connection left open", false, []string{"the test left connections open on the server", "database \"oke_pgtest_"}},
		{"done, then charged again", true, nil},
		{"charge beyond the share", false, []string{"opens pools of 3 connections in all, more than its share of 2"}},
		{"need declared", true, nil},
		{"share bigger than the budget", false, []string{"more than the budget of"}},
		{"parent holds a share", false, []string{"while TestBudgetChild, its parent, holds one"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestBudgetChild$", "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), childEnv+"="+c.name)
			out, err := cmd.CombinedOutput()
			if passed := err == nil; passed != c.pass {
				t.Errorf("the child's test passed = %v, want %v (err %v):\n%s", passed, c.pass, err, out)
			}
			for _, w := range c.wants {
				if !strings.Contains(string(out), w) {
					t.Errorf("the child's output does not say %q:\n%s", w, out)
				}
			}
		})
	}
}

// TestBudgetChild is TestBudgetRules' child: one scenario, named by
// childEnv.
func TestBudgetChild(t *testing.T) {
	scenario := os.Getenv(childEnv)
	if scenario == "" {
		return
	}
	LeakWait = time.Second // the leaks here stay: no need to wait long
	open := func(c *Conns, dsn string) *sql.DB {
		db, err := sql.Open("pgx", c.DSN(dsn))
		if err != nil {
			t.Fatal(err)
		}
		db.SetMaxOpenConns(1)
		if err := db.Ping(); err != nil {
			t.Fatal(err)
		}
		return db
	}
	switch scenario {
	case "pool closed before the end":
		db := open(Charge(t, 1), URL(t))
		t.Cleanup(func() { db.Close() })
	case "pool left open":
		open(Charge(t, 1), URL(t))
	case "database with a connection left open":
		_, dsn := NewDatabase(t, "oke_pgtest")
		Charge(t, 1)
		db, err := sql.Open("pgx", dsn) // a connection without the test's name
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Ping(); err != nil {
			t.Fatal(err)
		}
	case "done, then charged again":
		for range 3 {
			c := Charge(t, 2)
			open(c, URL(t)).Close()
			c.Done()
		}
	case "charge beyond the share":
		Charge(t, 2)
		Charge(t, 1)
	case "need declared":
		Need(t, 3)
		a, b := Charge(t, 2), Charge(t, 1)
		defer open(a, URL(t)).Close()
		defer open(b, URL(t)).Close()
	case "share bigger than the budget":
		budget, err := Budget()
		if err != nil {
			t.Fatal(err)
		}
		Charge(t, budget+1)
	case "parent holds a share":
		Charge(t, 1)
		t.Run("sub", func(t *testing.T) { Charge(t, 1) })
	default:
		t.Fatalf("no scenario %q", scenario)
	}
}
