package admin

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/okengine/oke"
	"github.com/okengine/oke/internal/httpx"
)

// Live updates: the console's runs page and run page follow the journal
// over Server-Sent Events. The journal has no change feed, so each stream
// reads the journal every a.poll (500 ms) — one ListRuns (a page) or one
// GetRun per stream per tick — and sends the page or the run whenever what
// it shows changed. A stream ends after maxStream (the browser's
// EventSource reconnects at once), when the client leaves, or on a store
// error (sent as an "error" event first).

// maxStream bounds one SSE response, so that no stream outlives a server's
// graceful shutdown for long.
const maxStream = 2 * time.Minute

// stream serves an SSE response that sends event whenever read's answer
// changes (and once at the start).
func (a *api) stream(w http.ResponseWriter, r *http.Request, event string, read func(ctx context.Context) (any, *oke.Error)) {
	rc := http.NewResponseController(w)
	// A server's write timeout would cut the stream short: the stream ends
	// on its own after maxStream. (A server that cannot set it leaves it.)
	_ = rc.SetWriteDeadline(time.Now().Add(maxStream + 30*time.Second))
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, "retry: 1000\n\n")
	ctx, cancel := context.WithTimeout(r.Context(), maxStream)
	defer cancel()
	var last [sha256.Size]byte
	tick := time.NewTicker(a.poll)
	defer tick.Stop()
	beat := time.Now()
	for {
		v, e := read(ctx)
		if ctx.Err() != nil {
			return
		}
		if e != nil {
			b, _ := json.Marshal(map[string]any{"error": map[string]string{"code": e.Code, "message": e.Message}})
			fmt.Fprintf(w, "event: error\ndata: %s\n\n", b)
			rc.Flush()
			return
		}
		b, err := httpx.Marshal(v)
		if err != nil {
			return
		}
		if sum := sha256.Sum256(b); sum != last {
			last = sum
			if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n", event, b); err != nil {
				return
			}
			if rc.Flush() != nil {
				return
			}
			beat = time.Now()
		} else if time.Since(beat) > 15*time.Second {
			fmt.Fprint(w, ": keep-alive\n\n")
			if rc.Flush() != nil {
				return
			}
			beat = time.Now()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// runsEvents serves GET /runs/events: the runs listing (same filters and
// limit as GET /runs) as a "runs" event each time it changes.
func (a *api) runsEvents(w http.ResponseWriter, r *http.Request) {
	if a.j == nil {
		oke.WriteError(w, noJournal())
		return
	}
	f, e := runFilter(r)
	var limit int
	if e == nil {
		limit, e = limitParam(r, defaultLimit, maxLimit)
	}
	if e != nil {
		oke.WriteError(w, e)
		return
	}
	a.stream(w, r, "runs", func(ctx context.Context) (any, *oke.Error) {
		p, err := a.runsPage(ctx, f, limit)
		if err != nil {
			return nil, storeError(err)
		}
		return p, nil
	})
}

// runEvents serves GET /runs/{id}/events: the run (as GET /runs/{id}) as a
// "run" event each time it changes.
func (a *api) runEvents(w http.ResponseWriter, r *http.Request) {
	if a.j == nil {
		oke.WriteError(w, noJournal())
		return
	}
	id := r.PathValue("id")
	if _, e := a.runView(r.Context(), id); e != nil {
		oke.WriteError(w, e)
		return
	}
	a.stream(w, r, "run", func(ctx context.Context) (any, *oke.Error) {
		return a.runView(ctx, id)
	})
}
