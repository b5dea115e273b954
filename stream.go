package oke

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// serveStream runs a stream or live flow. Nothing is stored: these shapes
// never honor an Idempotency-Key. The client's disconnect cancels ctx.
func (a *App) serveStream(f *flow, in any, id Identity, w http.ResponseWriter, r *http.Request) {
	fx := &Fx{app: a, flow: f, identity: id}
	ctx := r.Context()
	if f.opts.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.opts.Timeout)
		defer cancel()
	}
	if f.shape == shapeLive {
		// Stop the feed when the app closes, too.
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		go func() {
			select {
			case <-a.feedsEnd:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	sw := &streamWriter{w: w, rc: http.NewResponseController(w), live: f.shape == shapeLive, perWrite: writeTimeout(r)}
	// The server's write deadline (http.Server.WriteTimeout, set once per
	// request) would cut a stream or a feed off mid-body: from here on each
	// write gets a deadline of its own instead, and the one after the last
	// write covers what the server writes when the handler returns (the
	// chunked body's end).
	sw.extend()
	defer sw.extend()
	f.metrics.executions.Inc()
	err := func() (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("flow %s panicked: %v", f.name, p)
			}
		}()
		return f.stream(ctx, in, fx, sw)
	}()
	if err == nil {
		if !sw.wrote {
			sw.WriteHeader(http.StatusOK)
		}
		return
	}
	a.logFailure(ctx, f, err)
	if !sw.wrote {
		e, _ := asError(err)
		writeEnvelope(w, e)
		return
	}
	// Headers and part of the body are out: cut the stream so the client
	// sees it did not end cleanly.
	panic(http.ErrAbortHandler)
}

// streamWriter flushes every write through http.ResponseController, which
// finds the Flusher even behind wrapping ResponseWriters.
//
// It also keeps the connection's write deadline ahead of the stream: before
// each write it sets the deadline perWrite from now (the server's
// WriteTimeout), or clears it when the server has none. A stream or a live
// feed may so last as long as it likes, while a client that stops reading
// still cannot hold it forever: one write it does not take within
// WriteTimeout ends the stream. Where the connection has no deadlines
// (http.ErrNotSupported) nothing changes. The read deadline needs no care:
// the body was read before the flow started, and net/http clears the read
// deadline once the request's body is done (HTTP/2's per-stream ReadTimeout
// only ends the request body).
type streamWriter struct {
	w        http.ResponseWriter
	rc       *http.ResponseController
	live     bool
	wrote    bool
	perWrite time.Duration // each write's deadline; 0: none
}

// writeTimeout is the WriteTimeout of the http.Server serving r, or 0.
func writeTimeout(r *http.Request) time.Duration {
	if srv, ok := r.Context().Value(http.ServerContextKey).(*http.Server); ok && srv.WriteTimeout > 0 {
		return srv.WriteTimeout
	}
	return 0
}

// extend moves the connection's write deadline to perWrite from now (or
// clears it). Errors are left to the write that follows: it reports the
// connection's state; http.ErrNotSupported means a writer without deadlines.
func (s *streamWriter) extend() {
	var t time.Time
	if s.perWrite > 0 {
		t = time.Now().Add(s.perWrite)
	}
	s.rc.SetWriteDeadline(t)
}

func (s *streamWriter) Header() http.Header { return s.w.Header() }

func (s *streamWriter) WriteHeader(code int) {
	if s.wrote {
		return
	}
	s.wrote = true
	h := s.w.Header()
	if s.live {
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
	} else if h.Get("Content-Type") == "" {
		h.Set("Content-Type", "application/octet-stream")
	}
	s.extend()
	s.w.WriteHeader(code)
	s.rc.Flush()
}

func (s *streamWriter) Write(p []byte) (int, error) {
	if !s.wrote {
		s.WriteHeader(http.StatusOK)
	}
	s.extend()
	n, err := s.w.Write(p)
	if err != nil {
		return n, err
	}
	return n, s.rc.Flush()
}

// Flush implements http.Flusher.
func (s *streamWriter) Flush() {
	s.extend()
	s.rc.Flush()
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *streamWriter) Unwrap() http.ResponseWriter { return s.w }

// sseSender returns the send function of a live feed.
func sseSender(w http.ResponseWriter) func(Event) error {
	if sw, ok := w.(*streamWriter); ok && !sw.wrote {
		sw.WriteHeader(http.StatusOK) // open the feed at once
	}
	return func(e Event) error {
		var b bytes.Buffer
		if e.ID != "" {
			fmt.Fprintf(&b, "id: %s\n", oneLine(e.ID))
		}
		if e.Name != "" {
			fmt.Fprintf(&b, "event: %s\n", oneLine(e.Name))
		}
		data := e.Data
		if len(data) == 0 {
			data = []byte("null")
		}
		for _, line := range bytes.Split(data, []byte("\n")) {
			b.WriteString("data: ")
			b.Write(line)
			b.WriteByte('\n')
		}
		b.WriteByte('\n')
		_, err := w.Write(b.Bytes())
		return err
	}
}

func oneLine(s string) string { return strings.NewReplacer("\n", " ", "\r", " ").Replace(s) }
