package main

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	"github.com/okengine/oke/internal/nemesis"
	"github.com/okengine/oke/internal/pgcluster"
)

// postgresTarget is two demo instances sharing one database of a private
// PostgreSQL server (internal/pgcluster), which the faults stop, kill,
// hang and cut off. The shared server of the tests is never touched.
type postgresTarget struct {
	c      config
	rng    *rand.Rand
	pg     *pgcluster.Cluster
	insts  []*nemesis.Instance
	turn   int // which instance the next instance fault hits
	pauses int // pg-pause turns so far (every other one is a backends fault)
}

func newPostgresTarget(ctx context.Context, c config, rng *rand.Rand) (target, error) {
	if err := pgcluster.Available(); err != nil {
		return nil, fmt.Errorf("no private PostgreSQL server can be started: %w", err)
	}
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	pg, err := pgcluster.Start(sctx, pgcluster.Options{})
	if err != nil {
		return nil, fmt.Errorf("start a private PostgreSQL server: %w", err)
	}
	t := &postgresTarget{c: c, rng: rng, pg: pg}
	for _, name := range []string{"a", "b"} {
		addr, err := nemesis.FreeAddr()
		if err != nil {
			pg.Close()
			return nil, err
		}
		t.insts = append(t.insts, &nemesis.Instance{Name: name, Bin: c.bin, Addr: addr, Log: filepath.Join(c.work, name+".log"),
			Args: []string{"-postgres", pg.DSN("test"), "-lease", "2s", "-retry-delay", "1s", "-sweep-cron", "off", "-admin-token", "nemesis-admin-token-0123456789"}})
	}
	return t, nil
}

func (t *postgresTarget) instances() []*nemesis.Instance { return t.insts }
func (t *postgresTarget) promise() nemesis.Promise       { return nemesis.ExactlyOnce }
func (t *postgresTarget) notes() []string {
	return []string{fmt.Sprintf("private PostgreSQL server on 127.0.0.1:%d (fsync off: a killed server loses nothing the kernel has), log %s", t.pg.Port(), filepath.Join(t.c.work, "postgres.log"))}
}

// next is the instance the next instance fault hits: a and b in turn.
func (t *postgresTarget) next() *nemesis.Instance {
	in := t.insts[t.turn%len(t.insts)]
	t.turn++
	return in
}

// backends terminates every client backend of the database.
func (t *postgresTarget) backends(ctx context.Context, f *nemesis.Fault) error {
	f.Kind, f.Target = "backends", "postgres"
	n, err := t.pg.TerminateBackends(ctx, "test")
	f.Note = fmt.Sprintf("terminated %d backends", n)
	return err
}

func (t *postgresTarget) faults() []faultKind {
	return []faultKind{
		{"sigkill", func(ctx context.Context, f *nemesis.Fault) error {
			in := t.next()
			f.Target, f.Disturbs = in.Name, []string{in.Name}
			in.Kill()
			f.Note = "killed, restarted"
			return in.Start(30 * time.Second)
		}},
		{"pg-restart", func(ctx context.Context, f *nemesis.Fault) error {
			f.Target = "postgres"
			if err := t.pg.Stop(ctx); err != nil {
				return err
			}
			d := jitter(t.rng, 300*time.Millisecond, 1500*time.Millisecond)
			sleepCtx(ctx, d)
			f.Note = fmt.Sprintf("stopped (fast) for %s, started", d.Round(time.Millisecond))
			return t.pg.Restart(ctx)
		}},
		{"sigstop", func(ctx context.Context, f *nemesis.Fault) error {
			in := t.next()
			f.Target, f.Disturbs = in.Name, []string{in.Name}
			d := jitter(t.rng, 500*time.Millisecond, 2*time.Second)
			if err := in.Signal(syscall.SIGSTOP); err != nil {
				return err
			}
			sleepCtx(ctx, d)
			f.Note = fmt.Sprintf("stopped for %s", d.Round(time.Millisecond))
			return in.Signal(syscall.SIGCONT)
		}},
		{"backends", t.backends},
		{"pg-pause", func(ctx context.Context, f *nemesis.Fault) error {
			f.Target = "postgres"
			if t.pauses++; t.pauses%2 == 0 {
				// Every other turn: a hang lasts longer than the client's
				// timeout, so half as many keep the run within its bound.
				return t.backends(ctx, f)
			}
			if err := t.pg.Pause(); err != nil {
				return err
			}
			sleepCtx(ctx, t.c.hang)
			f.Note = fmt.Sprintf("hung (SIGSTOP of every server process) for %s", t.c.hang)
			return t.pg.Resume()
		}},
		{"pg-kill", func(ctx context.Context, f *nemesis.Fault) error {
			f.Target = "postgres"
			if err := t.pg.Kill(); err != nil {
				return err
			}
			d := jitter(t.rng, 300*time.Millisecond, 1500*time.Millisecond)
			sleepCtx(ctx, d)
			f.Note = fmt.Sprintf("SIGKILLed every server process, down %s, restarted (crash recovery)", d.Round(time.Millisecond))
			return t.pg.Restart(ctx)
		}},
	}
}

func (t *postgresTarget) effects(ctx context.Context) (storeRows, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	db, err := sql.Open("pgx", t.pg.DSN("test"))
	if err != nil {
		return storeRows{}, err
	}
	defer db.Close()
	return readRows(ctx, db)
}

func (t *postgresTarget) close() {
	for _, in := range t.insts {
		in.Kill()
	}
	if log := t.pg.Log(); log != "" {
		os.WriteFile(filepath.Join(t.c.work, "postgres.log"), []byte(log), 0o644)
	}
	if err := t.pg.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "nemesis: close the private PostgreSQL server:", err)
	}
}
