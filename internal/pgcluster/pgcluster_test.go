package pgcluster_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/okengine/oke/internal/pgcluster"
)

func start(t *testing.T, opts pgcluster.Options) *pgcluster.Cluster {
	t.Helper()
	pgcluster.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := pgcluster.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return c
}

func exec(t *testing.T, ctx context.Context, dsn, sql string) {
	t.Helper()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func TestStartServesTheTestDatabase(t *testing.T) {
	c := start(t, pgcluster.Options{Conf: map[string]string{"work_mem": "'8MB'"}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if c.Port() == 0 || c.Port() == 5432 {
		t.Fatalf("port %d: want a private free port", c.Port())
	}
	if want := "127.0.0.1:"; !strings.Contains(c.DSN("test"), want) {
		t.Fatalf("DSN %s", c.DSN("test"))
	}
	exec(t, ctx, c.DSN("test"), `CREATE TABLE t (k int)`)
	got, err := c.Query(ctx, "test", `SHOW work_mem`)
	if err != nil || got != "8MB" {
		t.Fatalf("work_mem = %q, %v: want the Conf setting", got, err)
	}
	if got, _ := c.Query(ctx, "test", `SHOW fsync`); got != "off" {
		t.Fatalf("fsync = %q without Synchronous", got)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
}

func TestStopRestartKeepsData(t *testing.T) {
	c := start(t, pgcluster.Options{Synchronous: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	exec(t, ctx, c.DSN("test"), `CREATE TABLE t AS SELECT 1 AS k`)
	port := c.Port()
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Query(ctx, "test", `SELECT 1`); err == nil {
		t.Fatal("a stopped server answered")
	}
	if err := c.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if c.Port() != port {
		t.Fatalf("restarted on %d, was %d", c.Port(), port)
	}
	if got, err := c.Query(ctx, "test", `SELECT count(*) FROM t`); err != nil || got != "1" {
		t.Fatalf("after restart: %q, %v", got, err)
	}
	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Query(ctx, "test", `SELECT 1`); err == nil {
		t.Fatal("a killed server answered")
	}
	if err := c.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Query(ctx, "test", `SELECT count(*) FROM t`); err != nil || got != "1" {
		t.Fatalf("after kill and restart: %q, %v", got, err)
	}
}

func TestPauseHangsAndResumeAnswers(t *testing.T) {
	c := start(t, pgcluster.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.DSN("test"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if err := c.Pause(); err != nil {
		t.Fatal(err)
	}
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = conn.Exec(short, `SELECT 1`)
	cancelShort()
	if err == nil {
		t.Fatal("a paused server answered")
	}
	if err := c.Resume(); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Query(ctx, "test", `SELECT 41 + 1`); err != nil || got != "42" {
		t.Fatalf("after resume: %q, %v", got, err)
	}
}

func TestTerminateBackends(t *testing.T) {
	c := start(t, pgcluster.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.DSN("test"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	n, err := c.TerminateBackends(ctx, "test")
	if err != nil || n != 1 {
		t.Fatalf("terminated %d, %v: want 1", n, err)
	}
	if _, err := conn.Exec(ctx, `SELECT 1`); err == nil {
		t.Fatal("a terminated connection still answered")
	}
}

func TestSynchronousReplicaStreamsAndPromotes(t *testing.T) {
	primary := start(t, pgcluster.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	exec(t, ctx, primary.DSN("test"), `CREATE TABLE t (k int)`)
	replica, err := primary.StartReplica(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { replica.Close() })
	if got, err := primary.Query(ctx, "postgres", `SELECT sync_state FROM pg_stat_replication`); err != nil || got != "sync" {
		t.Fatalf("sync_state %q, %v", got, err)
	}
	// A commit on the primary is on the synchronous standby when it returns.
	exec(t, ctx, primary.DSN("test"), `INSERT INTO t VALUES (1)`)
	if got, err := replica.Query(ctx, "test", `SELECT count(*) FROM t`); err != nil || got != "1" {
		t.Fatalf("replica sees %q, %v", got, err)
	}
	if got, _ := replica.Query(ctx, "test", `SELECT pg_is_in_recovery()`); got != "true" {
		t.Fatalf("replica in recovery: %q", got)
	}

	// The multi-host DSN finds the writable one.
	dsn := pgcluster.MultiHostDSN("test", replica, primary)
	exec(t, ctx, dsn, `INSERT INTO t VALUES (2)`)

	if err := primary.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := replica.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	exec(t, ctx, dsn, `INSERT INTO t VALUES (3)`)
	if got, err := replica.Query(ctx, "test", `SELECT string_agg(k::text, ',' ORDER BY k) FROM t`); err != nil || got != "1,2,3" {
		t.Fatalf("promoted replica has %q, %v: want 1,2,3", got, err)
	}
}

func TestPromoteOfAPrimaryFails(t *testing.T) {
	c := start(t, pgcluster.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.Promote(ctx); err == nil {
		t.Fatal("promote of a primary: no error")
	}
}
