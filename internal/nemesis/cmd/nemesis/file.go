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

	"github.com/okengine/oke/internal/nemesis"
	_ "modernc.org/sqlite"
)

// fileTarget is one demo instance on the file driver, its data (oke's logs
// and the SQLite business database) on a small tmpfs when run as root.
type fileTarget struct {
	c      config
	rng    *rand.Rand
	data   string
	tmpfs  bool
	inst   *nemesis.Instance
	noteds []string
}

func newFileTarget(c config, rng *rand.Rand) (*fileTarget, error) {
	t := &fileTarget{c: c, rng: rng, data: filepath.Join(c.work, "data")}
	if os.Geteuid() == 0 {
		if err := nemesis.MountTmpfs(t.data, c.tmpfsSize); err != nil {
			// Root without the right to mount (a container without
			// CAP_SYS_ADMIN): say so, and run every other fault.
			t.noteds = append(t.noteds, fmt.Sprintf("%v: the full-disk fault is skipped", err))
		} else {
			t.tmpfs = true
		}
	} else {
		msg := "not root: no tmpfs can be mounted, so the full-disk fault is skipped"
		if os.Getenv("CI") == "true" {
			msg += " (CI=true: allowed for this fault only)"
		}
		t.noteds = append(t.noteds, msg)
	}
	if err := os.MkdirAll(t.data, 0o755); err != nil {
		return nil, err
	}
	addr, err := nemesis.FreeAddr()
	if err != nil {
		return nil, err
	}
	t.inst = &nemesis.Instance{Name: "a", Bin: c.bin, Addr: addr, Log: filepath.Join(c.work, "a.log"),
		Args: []string{"-data", t.data, "-lease", "2s", "-retry-delay", "1s", "-sweep-cron", "off", "-admin-token", "nemesis-admin-token-0123456789"}}
	return t, nil
}

func (t *fileTarget) instances() []*nemesis.Instance { return []*nemesis.Instance{t.inst} }
func (t *fileTarget) promise() nemesis.Promise       { return nemesis.AtLeastOnce }
func (t *fileTarget) notes() []string                { return t.noteds }

func (t *fileTarget) faults() []faultKind {
	in := t.inst
	ks := []faultKind{
		{"sigkill", func(ctx context.Context, f *nemesis.Fault) error {
			f.Target, f.Disturbs = in.Name, []string{in.Name}
			in.Kill()
			f.Note = "killed, restarted on the same folder"
			return in.Start(30 * time.Second)
		}},
		{"sigstop", func(ctx context.Context, f *nemesis.Fault) error {
			f.Target, f.Disturbs = in.Name, []string{in.Name}
			d := jitter(t.rng, 500*time.Millisecond, 2*time.Second)
			if err := in.Signal(syscall.SIGSTOP); err != nil {
				return err
			}
			sleepCtx(ctx, d)
			f.Note = fmt.Sprintf("stopped for %s", d.Round(time.Millisecond))
			return in.Signal(syscall.SIGCONT)
		}},
		{"torn-tail", func(ctx context.Context, f *nemesis.Fault) error {
			f.Target, f.Disturbs = in.Name, []string{in.Name}
			in.Kill()
			log := "idempotency.json"
			if t.rng.IntN(3) == 0 {
				if _, err := os.Stat(filepath.Join(t.data, "journal.json")); err == nil {
					log = "journal.json"
				}
			}
			note, err := nemesis.TearTail(filepath.Join(t.data, log), t.rng)
			if err != nil {
				return err
			}
			f.Note = "killed; " + note + "; restarted (the tail must heal)"
			return in.Start(30 * time.Second)
		}},
	}
	if t.tmpfs {
		ks = append(ks,
			faultKind{"disk-full", func(ctx context.Context, f *nemesis.Fault) error { return t.fillDisk(ctx, f, 0) }},
			// Nearly full: the store's small appends may pass while the
			// business database's pages do not, or the reverse. The disk
			// breathes: a few KiB are freed every 100 ms, and the load
			// fills them again.
			faultKind{"disk-nearly", func(ctx context.Context, f *nemesis.Fault) error {
				return t.fillDisk(ctx, f, int64(4+t.rng.IntN(12))*4096)
			}})
	}
	return ks
}

// fillDisk fills the tmpfs and holds it full for 0.5–2 s, then frees it.
// With room > 0 it frees room bytes every 100 ms meanwhile.
func (t *fileTarget) fillDisk(ctx context.Context, f *nemesis.Fault, room int64) error {
	f.Target = "disk"
	filler := filepath.Join(t.data, "nemesis-filler")
	n, err := nemesis.FillDisk(filler)
	if err != nil {
		nemesis.FreeDisk(filler)
		return err
	}
	d := jitter(t.rng, 500*time.Millisecond, 2*time.Second)
	if room == 0 {
		sleepCtx(ctx, d)
		f.Note = fmt.Sprintf("filled the tmpfs (%d MiB) for %s", n>>20, d.Round(time.Millisecond))
		return nemesis.FreeDisk(filler)
	}
	breaths := 0
	for end := time.Now().Add(d); time.Now().Before(end) && ctx.Err() == nil; breaths++ {
		if err := nemesis.LeaveRoom(filler, room); err != nil {
			nemesis.FreeDisk(filler)
			return err
		}
		sleepCtx(ctx, 100*time.Millisecond)
	}
	f.Note = fmt.Sprintf("filled the tmpfs (%d MiB), then freed %d KiB %d times, 100 ms apart", n>>20, room>>10, breaths)
	return nemesis.FreeDisk(filler)
}

func (t *fileTarget) effects(ctx context.Context) (storeRows, error) {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.data, "payments.db")+"?mode=ro")
	if err != nil {
		return storeRows{}, err
	}
	defer db.Close()
	return readRows(ctx, db)
}

func (t *fileTarget) close() {
	t.inst.Kill()
	if t.tmpfs {
		// Keep what the checker may need to show: copy nothing, the
		// report holds the history; the tmpfs goes.
		if err := nemesis.Unmount(t.data); err != nil {
			fmt.Fprintln(os.Stderr, "nemesis:", err)
		}
	}
}
