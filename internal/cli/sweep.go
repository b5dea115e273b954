package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"
)

// sweepDefaultBatch is how many rows one batch of oke idempotency sweep
// deletes: one driver Sweep call (one store statement or one log write).
const sweepDefaultBatch = 1000

func idempotencySweep(fs *flag.FlagSet) func(ctx context.Context, c *call) int {
	var (
		batch int
		js    bool
	)
	fs.IntVar(&batch, "batch", sweepDefaultBatch, "delete at most `N` rows per batch (1–100000)")
	fs.BoolVar(&js, "json", false, `print {"deleted": n, "batches": b} as JSON`)
	return func(ctx context.Context, c *call) int {
		if batch < 1 || batch > 100000 {
			return c.fail(&usageError{fmt.Errorf("-batch must be between 1 and 100000, got %d", batch)})
		}
		src, err := c.open(ctx)
		if err != nil {
			return c.fail(err)
		}
		tty := isTerminal(c.stderr)
		start := time.Now()
		total, batches := 0, 0
		var shown time.Time
		for {
			n, err := src.sweepBatch(ctx, batch)
			total += n
			batches++
			if err != nil {
				if tty {
					fmt.Fprintln(c.stderr)
				}
				return c.fail(fmt.Errorf("after deleting %s: %w", count(total, "expired row", "expired rows"), err))
			}
			if tty && (time.Since(shown) > 100*time.Millisecond || n < batch) {
				fmt.Fprintf(c.stderr, "\rsweeping: %s deleted, %s, %s", count(total, "expired row", "expired rows"), count(batches, "batch", "batches"), time.Since(start).Round(time.Millisecond))
				shown = time.Now()
			}
			if n < batch {
				break
			}
		}
		if tty {
			fmt.Fprintln(c.stderr)
		}
		if js {
			return printJSON(c.stdout, c.stderr, c.name, map[string]int{"deleted": total, "batches": batches})
		}
		fmt.Fprintf(c.stdout, "deleted %s in %s of at most %s\n", count(total, "expired row", "expired rows"), count(batches, "batch", "batches"), count(batch, "row", "rows"))
		return 0
	}
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
