package postgres_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// BenchmarkReplay is a retry of one completed keyed charge (a flow that
// inserts through Fx.Tx), served in process on one Postgres connection at a
// time, in each claim mode: what a replay costs in oke and the driver, its
// round trips included. Run with -benchmem.
func BenchmarkReplay(b *testing.B) {
	for _, m := range benchClaimModes {
		b.Run(m.name, func(b *testing.B) {
			app := benchChargeApp(b, m.mode)
			r := httptest.NewRequest(http.MethodPost, "/charges", nil)
			r.Header.Set("Idempotency-Key", "bench-replay-key-0000001")
			r.Header.Set("Content-Type", "application/json")
			body := strings.NewReader(`{"Amount":100}`)
			w := httptest.NewRecorder()
			post := func(replayed bool) {
				body.Reset(`{"Amount":100}`)
				r.Body = readCloser{body}
				w.Body.Reset()
				clear(w.Header())
				app.ServeHTTP(w, r)
				if w.Code != http.StatusCreated || (w.Header().Get("Idempotent-Replayed") == "true") != replayed {
					b.Fatalf("%d %s (replayed %q)", w.Code, w.Body, w.Header().Get("Idempotent-Replayed"))
				}
			}
			post(false) // the charge
			post(true)  // its first replay prepares the statements
			post(true)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				post(true)
			}
		})
	}
}

type readCloser struct{ *strings.Reader }

func (readCloser) Close() error { return nil }
