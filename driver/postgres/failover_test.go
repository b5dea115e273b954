package postgres_test

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/okengine/oke/driver/postgres"
	"github.com/okengine/oke/internal/pgtest"
)

// hungHost is a TCP server that accepts connections and never answers: a
// Postgres whose host froze (or a primary partitioned away) as a client sees
// it — the kernel completes the handshake, the startup gets no reply.
func hungHost(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	})
	t.Cleanup(func() {
		l.Close()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String()
}

// withFirstHost puts host before the host of the URL dsn: a multi-host DSN
// whose connections try host first.
func withFirstHost(t *testing.T, dsn, host string) string {
	t.Helper()
	at := strings.Index(dsn, "@")
	slash := strings.Index(dsn[at+1:], "/")
	if !strings.HasPrefix(dsn, "postgres") || at < 0 || slash < 0 {
		t.Fatalf("not a postgres:// URL with a user: %s", dsn)
	}
	return dsn[:at+1] + host + "," + dsn[at+1:]
}

// A multi-host DSN whose first host hangs (a failed-over primary that froze)
// still works: each connection gives up on the hung host after
// DefaultConnectTimeout and goes on to the next, for the pool and for the
// wake-up listener. Without a connect timeout every connection waited for the
// hung host forever.
func TestMultiHostDSNSkipsAHungHost(t *testing.T) {
	dsn := withFirstHost(t, pgtest.URL(t), hungHost(t))
	// Bounded by far more than DefaultConnectTimeout, so that a hang fails
	// the test instead of stopping it.
	ctx, cancel := context.WithTimeout(t.Context(), 12*postgres.DefaultConnectTimeout)
	defer cancel()
	c := pgtest.Charge(t, pgtest.DriverConns(testPool))
	d, err := postgres.Open(ctx, c.DSN(pgtest.WithPoolSize(dsn, testPool)))
	if err != nil {
		t.Fatalf("Open with a hung first host: %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })
	if got := d.Pool().Config().ConnConfig.ConnectTimeout; got != postgres.DefaultConnectTimeout {
		t.Fatalf("ConnectTimeout %v: want DefaultConnectTimeout", got)
	}
	if _, err := d.Pool().Exec(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	// The listener connects the same way.
	stop := d.HearWaiters()
	defer stop()
	for !d.Hearing() {
		select {
		case <-ctx.Done():
			t.Fatal("the wake-up listener never LISTENs past the hung host")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// A DSN's own connect_timeout stands.
func TestConnectTimeoutOfTheDSNStands(t *testing.T) {
	c := pgtest.Charge(t, pgtest.DriverConns(1))
	dsn := pgtest.WithPoolSize(pgtest.URL(t), 1)
	if strings.Contains(dsn, "?") {
		dsn += "&connect_timeout=17"
	} else {
		dsn += "?connect_timeout=17"
	}
	d, err := postgres.Open(t.Context(), c.DSN(dsn))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if got := d.Pool().Config().ConnConfig.ConnectTimeout; got != 17*time.Second {
		t.Fatalf("ConnectTimeout %v: want the DSN's 17s", got)
	}
}
