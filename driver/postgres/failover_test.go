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

// freezingProxy forwards TCP connections to upstream until freeze is
// called; from then on it forwards nothing, in either direction, on old
// connections or new ones (it still accepts them): the server froze.
type freezingProxy struct {
	addr   string
	frozen chan struct{}
	freeze func()
}

func newFreezingProxy(t *testing.T, upstream string) *freezingProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &freezingProxy{addr: l.Addr().String(), frozen: make(chan struct{})}
	p.freeze = sync.OnceFunc(func() { close(p.frozen) })
	done := make(chan struct{})
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	keep := func(c net.Conn) {
		mu.Lock()
		defer mu.Unlock()
		conns = append(conns, c)
	}
	pipe := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			select {
			case <-p.frozen:
				<-done // hold what was read, forward nothing
				return
			default:
			}
			if n > 0 {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				dst.Close()
				return
			}
		}
	}
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			keep(c)
			wg.Go(func() {
				select {
				case <-p.frozen:
					return // accepted, never answered
				default:
				}
				up, err := net.Dial("tcp", upstream)
				if err != nil {
					c.Close()
					return
				}
				keep(up)
				wg.Go(func() { pipe(up, c) })
				pipe(c, up)
			})
		}
	})
	t.Cleanup(func() {
		l.Close()
		close(done)
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return p
}

// When a statement on a frozen server hits its deadline, pgx gives up on
// the connection and cleans it up in the background — a cancel request to
// the frozen server and a drain of the socket, each allowed a hard-coded
// 15 s — and pgxpool frees the connection's slot only after that. The
// driver's pool bounds the cleanup (dial.go), so that the slot is free at
// once and the pool can connect elsewhere (the next host of a multi-host
// DSN, after a failover). Without the bound the slot stayed taken for 15 s,
// beyond this test's 10 s wait.
func TestFrozenServerFreesThePoolSlot(t *testing.T) {
	url := pgtest.URL(t)
	at := strings.Index(url, "@")
	slash := strings.Index(url[at+1:], "/")
	upstream := url[at+1 : at+1+slash]
	c := pgtest.Charge(t, pgtest.DriverConns(1))
	// After the charge, so that the proxy's connections to the server are
	// closed before the charge's end checks that none is left.
	p := newFreezingProxy(t, upstream)
	dsn := url[:at+1] + p.addr + url[at+1+slash:]
	d, err := postgres.Open(t.Context(), c.DSN(pgtest.WithPoolSize(dsn, 1)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	if _, err := d.Pool().Exec(t.Context(), "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	p.freeze()
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	_, err = d.Pool().Exec(ctx, "SELECT 1")
	cancel()
	if err == nil {
		t.Fatal("a frozen server answered")
	}
	wait, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for d.Pool().Stat().TotalConns() != 0 {
		select {
		case <-wait.Done():
			t.Fatalf("the pool still holds the dead connection's slot (%d connections) 10 s after its statement gave up", d.Pool().Stat().TotalConns())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
