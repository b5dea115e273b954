package app_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/okengine/oke/examples/payments/app"
)

// BenchmarkPostCharges measures POST /charges over HTTP (loopback), each
// request a fresh Idempotency-Key: a claim, an SQLite insert, a stored
// response. Run with -cpu to vary the number of concurrent clients.
func BenchmarkPostCharges(b *testing.B) {
	for _, drv := range []string{"memory", "file"} {
		b.Run("driver="+drv, func(b *testing.B) {
			e := setupBench(b, drv)
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
			var seq atomic.Int64
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					req, _ := http.NewRequest("POST", e+"/charges", strings.NewReader(`{"amount":100,"currency":"usd"}`))
					req.Header.Set("Idempotency-Key", fmt.Sprintf("bench-key-%016d", seq.Add(1)))
					resp, err := client.Do(req)
					if err != nil {
						b.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 201 {
						b.Errorf("status %d", resp.StatusCode)
						return
					}
				}
			})
		})
	}
}

// setupBench serves the demo with driver drv and returns its URL.
func setupBench(b *testing.B, drv string) string {
	b.Helper()
	cfg := app.DefaultConfig()
	cfg.DataDir = b.TempDir()
	cfg.Driver = drv
	s, err := app.Open(b.Context(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	hs := serve(s)
	b.Cleanup(func() {
		s.Shutdown()
		hs.Close()
		s.Close(context.Background())
	})
	return hs.URL
}
