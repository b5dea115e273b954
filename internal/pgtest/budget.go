package pgtest

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// The budget
//
// The test server is shared: by the packages go test runs at once (as many
// as there are CPUs), and on a developer's machine or in a user's CI by
// other clients. So every connection a test opens comes out of one budget
// of Budget connections for all of oke's test processes on the machine
// together, and a test waits for its share before it opens a pool:
//
//	c := pgtest.Charge(t, pgtest.DriverConns(2)) // waits for 5 connections
//	d, err := postgres.Open(ctx, c.DSN(pgtest.WithPoolSize(dsn, 2)))
//
// The share is taken at the test's first Charge: as many connections as
// Need declared for the test, or that charge's. Later charges of the test
// must fit in it — a test that opens pools beyond it fails, it does not
// wait (a test that holds part of the budget and waits for more could wait
// forever for tests that wait for it). When every charge of the test is
// Done, or when the test ends, the share goes back, once the server has no
// backend of the test left: a test that leaves a connection open fails.
//
// Each process also keeps one connection of its own (Admin) outside the
// budget: with the five packages that use Postgres, the suite holds at most
// Budget + 5 connections on the server.
//
// The shares are flocks on files in a folder of the temporary directory
// named after the server: the kernel drops those of a test process that
// dies. On systems without flock the budget is per test process.

// BudgetEnv names the environment variable that sets Budget.
const BudgetEnv = "OKE_TEST_PG_CONNS"

// DefaultBudget is Budget when BudgetEnv is not set: with Admin's
// connection per package, 33 connections at most, which leaves the rest of a
// server's default max_connections (100) to other clients.
const DefaultBudget = 28

// LeakWait is how long a test's end waits for the server to see its
// connections go (a backend takes a moment to exit after its client closed
// it) before it reports them as left open.
var LeakWait = 30 * time.Second

var (
	budgetOnce sync.Once
	budgetN    int
	budgetErr  error
)

// Budget returns how many connections oke's tests may hold on the test
// server at once, all test processes together: BudgetEnv, else
// DefaultBudget.
func Budget() (int, error) {
	budgetOnce.Do(func() {
		budgetN = DefaultBudget
		if s := os.Getenv(BudgetEnv); s != "" {
			budgetN, budgetErr = strconv.Atoi(s)
			if budgetErr == nil && budgetN < 1 {
				budgetErr = fmt.Errorf("want at least 1")
			}
			if budgetErr != nil {
				budgetErr = fmt.Errorf("%s=%q: %v", BudgetEnv, s, budgetErr)
			}
		}
	})
	return budgetN, budgetErr
}

// DriverConns is how many connections a Postgres driver opened on a DSN
// with pool_max_conns=pool holds at most: its pool, the pool of its DB (the
// flows' transactions, Fx.Tx) with the same settings, and its wake-up
// listener (WatchDue).
func DriverConns(pool int) int { return 2*pool + 1 }

// WithPoolSize returns dsn with pool_max_conns=n: pgxpool's setting, which
// the Postgres driver's pools (and the demo's) read.
func WithPoolSize(dsn string, n int) string {
	return WithParam(dsn, "pool_max_conns", strconv.Itoa(n))
}

// share is a test's part of the budget.
type share struct {
	t    testing.TB
	name string // t.Name(), for finding a test's ancestors
	tag  string // the application_name prefix of the test's connections

	mu      sync.Mutex
	need    int           // Need's declaration, 0 if none
	size    int           // connections held (0: none)
	release func()        // gives the held connections back
	used    int           // connections charged and not Done
	charges int           // charges made, for their tags
	dbs     []string      // databases of the test (NewDatabase)
	admin   *pgxpool.Pool // for the leak check and the drops
}

var (
	sharesMu sync.Mutex
	shares   = map[testing.TB]*share{}
	tagSeq   atomic.Int64
)

// shareOf returns t's share, making it (and its end: the leak check, the
// drop of its databases, the return of its connections) on first use.
func shareOf(t testing.TB) *share {
	t.Helper()
	admin := AdminPool(t)
	sharesMu.Lock()
	defer sharesMu.Unlock()
	s := shares[t]
	if s == nil {
		s = &share{t: t, name: t.Name(), tag: fmt.Sprintf("oke-test-%d-%d", os.Getpid(), tagSeq.Add(1)), admin: admin}
		shares[t] = s
		t.Cleanup(s.end)
	}
	return s
}

// Need declares that t holds up to n connections on the server at once (the
// sizes of its pools and of its demo processes' pools): its first Charge
// takes that many from the budget. Call it before t's first Charge, when
// the test opens more than one pool.
func Need(t testing.TB, n int) {
	t.Helper()
	s := shareOf(t)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.size > 0 {
		t.Fatalf("pgtest.Need(%d) after the test took its share (%d connections): declare what it needs before its first Charge", n, s.size)
	}
	s.need = n
}

// Conns are connections charged to a test's share: the pools opened with
// DSN, which names them (application_name) so that Done and the test's end
// can tell whether they are gone.
type Conns struct {
	s    *share
	n    int
	tag  string
	done bool
}

// Charge counts n connections (the most the pools the caller opens next can
// hold) against t's share, taking the share first when t holds none: as
// many connections as Need declared, or n. It waits while the budget is
// short, and fails t when n does not fit in t's share or in the budget.
func Charge(t testing.TB, n int) *Conns {
	t.Helper()
	s := shareOf(t)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.size == 0 {
		size := max(s.need, n)
		budget, err := Budget()
		if err != nil {
			t.Fatalf("pgtest: %v", err)
		}
		if size > budget {
			t.Fatalf("pgtest: %s needs %d connections at once, more than the budget of %d (%s)", t.Name(), size, budget, BudgetEnv)
		}
		if a := s.holdingAncestor(); a != "" {
			t.Fatalf("pgtest: %s takes a share of the budget while %s, its parent, holds one: "+
				"a parent's share lasts until its subtests end, which could wait for it forever; open the pools in the subtests only",
				t.Name(), a)
		}
		dir, err := slotDir()
		if err != nil {
			t.Fatalf("pgtest: the budget's folder: %v", err)
		}
		release, err := acquireSlots(t, dir, budget, size)
		if err != nil {
			t.Fatalf("pgtest: take %d connections of the budget: %v", size, err)
		}
		s.size, s.release = size, release
	}
	if s.used+n > s.size {
		t.Fatalf("pgtest: %s opens pools of %d connections in all, more than its share of %d: declare what it needs at once with pgtest.Need before its first Charge",
			t.Name(), s.used+n, s.size)
	}
	s.used += n
	s.charges++
	return &Conns{s: s, n: n, tag: fmt.Sprintf("%s/%d", s.tag, s.charges)}
}

// holdingAncestor returns the name of a test above s's that holds a share,
// or "". (Locks: a test's, then its ancestors'.)
func (s *share) holdingAncestor() string {
	sharesMu.Lock()
	var above []*share
	for _, o := range shares {
		if strings.HasPrefix(s.name, o.name+"/") {
			above = append(above, o)
		}
	}
	sharesMu.Unlock()
	for _, o := range above {
		o.mu.Lock()
		held := o.size > 0
		o.mu.Unlock()
		if held {
			return o.name
		}
	}
	return ""
}

// DSN returns dsn with the connections' application_name.
func (c *Conns) DSN(dsn string) string { return WithParam(dsn, "application_name", c.tag) }

// Tag returns the connections' application_name.
func (c *Conns) Tag() string { return c.tag }

// Done waits until the server has no backend of c left (the pools opened
// with c's DSN are closed, the processes that used it have exited), and
// gives c's connections back to the test's share; the share goes back to
// the budget when the test has no other connections charged. It fails the
// test when backends remain after LeakWait. Call it when the test opens
// pools again after closing these (e.g. it restarts a process); otherwise
// the test's end does it.
func (c *Conns) Done() {
	s := c.s
	s.t.Helper()
	if left := s.waitGone(c.tag, "", nil); left != "" {
		s.t.Errorf("pgtest: connections %s still open %s after they were done:\n%s", c.tag, LeakWait, left)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.done {
		return
	}
	c.done = true
	s.used -= c.n
	if s.used == 0 && s.release != nil {
		s.release()
		s.size, s.release = 0, nil
	}
}

// end is the test's last cleanup: it fails the test for each connection it
// left open (after waiting LeakWait for them to go), drops its databases
// and gives its share back.
func (s *share) end() {
	if left := s.waitGone("", s.tag+"/", s.dbs); left != "" {
		s.t.Errorf("pgtest: the test left connections open on the server (%s after its end):\n%s", LeakWait, left)
		// End them, so that the budget is true again.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := s.admin.Exec(ctx, `SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity
			WHERE (starts_with(application_name, $1) OR datname = ANY($2)) AND pid <> pg_backend_pid()`, s.tag+"/", s.dbs)
		cancel()
		if err != nil {
			s.t.Errorf("pgtest: end the connections left open: %v", err)
		}
	}
	for _, db := range s.dbs {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if _, err := s.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)"); err != nil {
			s.t.Errorf("drop database %s: %v", db, err)
		}
		cancel()
	}
	s.mu.Lock()
	if s.release != nil {
		s.release()
		s.size, s.release = 0, nil
	}
	s.mu.Unlock()
	sharesMu.Lock()
	delete(shares, s.t)
	sharesMu.Unlock()
}

// waitGone waits up to LeakWait until the server has no backend whose
// application_name is tag, or starts with prefix (unless ""), or that is
// connected to one of dbs, and describes those that remain ("" when none
// does).
func (s *share) waitGone(tag, prefix string, dbs []string) string {
	const which = `(($1 <> '' AND application_name = $1) OR ($2 <> '' AND starts_with(application_name, $2)) OR datname = ANY($3))
		AND pid <> pg_backend_pid()`
	if dbs == nil {
		dbs = []string{}
	}
	deadline := time.Now().Add(LeakWait)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var n int
		err := s.admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE `+which, tag, prefix, dbs).Scan(&n)
		cancel()
		if err != nil {
			return fmt.Sprintf("\t(count them: %v)\n", err)
		}
		if n == 0 {
			return ""
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rows, err := s.admin.Query(ctx, `SELECT pid, application_name, coalesce(datname, ''), coalesce(state, ''), left(query, 120)
		FROM pg_stat_activity WHERE `+which+` ORDER BY pid`, tag, prefix, dbs)
	if err != nil {
		return fmt.Sprintf("\t(list them: %v)\n", err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var pid int32
		var app, db, state, query string
		if err := rows.Scan(&pid, &app, &db, &state, &query); err != nil {
			return fmt.Sprintf("\t(list them: %v)\n", err)
		}
		fmt.Fprintf(&b, "\tpid %d, application_name %q, database %q, %s: %s\n", pid, app, db, state, query)
	}
	if err := rows.Err(); err != nil {
		return fmt.Sprintf("\t(list them: %v)\n", err)
	}
	return b.String() // "" if they went while listed
}
