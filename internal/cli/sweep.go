package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"
)

// sweepDefaultBatch is how many rows one batch of oke idempotency sweep
// deletes: one driver Sweep call (one store statement or one log write).
const sweepDefaultBatch = 1000

func idempotencySweep(ctx context.Context, name string, args []string, stdout, stderr io.Writer) int {
	var (
		t     target
		batch int
		js    bool
	)
	fs := newFlags(name, "[-addr URL | -data DIR] [-batch N] [-json]",
		`Deletes every expired Idempotency-Key row (past its TTL, no live lease), in
batches of -batch rows, one store call each: the store is held for one batch
at a time, never for the whole sweep, so an app using it (-addr) keeps
serving. On a terminal it shows a progress line; it prints how many rows it
deleted.`, stderr, &t)
	fs.IntVar(&batch, "batch", sweepDefaultBatch, "delete at most `N` rows per batch (1–100000)")
	fs.BoolVar(&js, "json", false, `print {"deleted": n, "batches": b} as JSON`)
	if _, code, ok := parse(fs, args, 0, stderr); !ok {
		return code
	}
	if batch < 1 || batch > 100000 {
		return fail(stderr, name, &usageError{fmt.Errorf("-batch must be between 1 and 100000, got %d", batch)})
	}
	src, err := t.open(false)
	if err != nil {
		return fail(stderr, name, err)
	}
	defer src.close()
	tty := isTerminal(stderr)
	start := time.Now()
	total, batches := 0, 0
	var shown time.Time
	for {
		n, err := src.sweepBatch(ctx, batch)
		total += n
		batches++
		if err != nil {
			if tty {
				fmt.Fprintln(stderr)
			}
			return fail(stderr, name, fmt.Errorf("after deleting %d rows: %w", total, err))
		}
		if tty && (time.Since(shown) > 100*time.Millisecond || n < batch) {
			fmt.Fprintf(stderr, "\rsweeping: %d expired rows deleted, %d batches, %s", total, batches, time.Since(start).Round(time.Millisecond))
			shown = time.Now()
		}
		if n < batch {
			break
		}
	}
	if tty {
		fmt.Fprintln(stderr)
	}
	if js {
		return printJSON(stdout, stderr, name, map[string]int{"deleted": total, "batches": batches})
	}
	fmt.Fprintf(stdout, "deleted %d expired rows in %d batches of at most %d\n", total, batches, batch)
	return 0
}

// isTerminal reports whether w is a terminal (a character device): the
// progress line is only for people.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
