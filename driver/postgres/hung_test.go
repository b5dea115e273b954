package postgres_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/okengine/oke"
	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/postgres"
	"github.com/okengine/oke/internal/pgtest"
)

// hangProxy is a TCP proxy between the driver and the test server that
// can stop forwarding: to the driver, a Postgres that stopped answering (a
// SIGSTOPped server, a network partition), without touching the shared
// server. A paused proxy still accepts connections and takes what clients
// send; it passes nothing on, either way. A connection its client gives up
// on is closed on the server's side too. When the proxy resumes, every
// connection that sent something meanwhile is reset (as a partition that
// heals with the connections caught in it broken), so the server never
// sees what was sent during the hang; the others forward again.
type hangProxy struct {
	ln       net.Listener
	upstream string

	mu     sync.Mutex
	paused chan struct{} // closed by Resume; nil while forwarding
	conns  map[net.Conn]bool
	// held counts the connections with a chunk sent while paused, to be
	// reset on Resume; settled is signalled whenever it drops.
	held    int
	settled chan struct{}
	wg      sync.WaitGroup
}

func newHangProxy(t *testing.T, upstream string) *hangProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &hangProxy{ln: ln, upstream: upstream, conns: map[net.Conn]bool{}, settled: make(chan struct{}, 1)}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *hangProxy) port() string { return fmt.Sprint(p.ln.Addr().(*net.TCPAddr).Port) }

// Pause stops forwarding.
func (p *hangProxy) Pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused == nil {
		p.paused = make(chan struct{})
	}
}

// Resume forwards again, once the connections that sent something while
// paused are reset.
func (p *hangProxy) Resume() {
	p.mu.Lock()
	if p.paused != nil {
		close(p.paused)
		p.paused = nil
	}
	p.mu.Unlock()
	for {
		p.mu.Lock()
		n := p.held
		p.mu.Unlock()
		if n == 0 {
			return
		}
		<-p.settled
	}
}

func (p *hangProxy) gate() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused
}

func (p *hangProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.upstream)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[s] = true, true
		p.mu.Unlock()
		gone := make(chan struct{})
		var once sync.Once
		end := func() {
			once.Do(func() {
				close(gone)
				c.Close()
				s.Close()
				p.mu.Lock()
				delete(p.conns, c)
				delete(p.conns, s)
				p.mu.Unlock()
			})
		}
		p.wg.Add(2)
		go p.pump(s, c, gone, end)
		go p.pump(c, s, gone, end)
	}
}

// pump copies from src to dst, holding each chunk while the proxy is
// paused, until either side ends.
func (p *hangProxy) pump(dst, src net.Conn, gone <-chan struct{}, end func()) {
	defer p.wg.Done()
	defer end()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if g := p.gate(); g != nil {
				// Held until resumed or given up; then reset either way.
				p.hold(1)
				select {
				case <-g:
				case <-gone:
				}
				end()
				p.hold(-1)
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *hangProxy) hold(n int) {
	p.mu.Lock()
	p.held += n
	p.mu.Unlock()
	if n < 0 {
		select {
		case p.settled <- struct{}{}:
		default:
		}
	}
}

func (p *hangProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.Resume()
	p.wg.Wait()
}

// TestHungPostgresAnswers503: issue 21 (3). With the server hung (the
// proxy forwards nothing), every request is answered within the app's
// StoreTimeout — a new key 503 StoreUnavailable (nothing ran: its claim,
// BEGIN and first statement never reached the server), a replay 503
// StoreUnavailable too, both with Retry-After — and the connections stuck
// on the hung server are abandoned. A server that hangs between the
// flow's write and its COMMIT gives 503 OutcomeUnknown at the deadline.
// Once it answers again, the retried keys run exactly once, the
// acknowledged one still replays its answer, and no charge is lost or
// doubled.
func TestHungPostgresAnswers503(t *testing.T) {
	url, _ := server(t)
	cfg, err := pgconn.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	proxy := newHangProxy(t, net.JoinHostPort(cfg.Host, fmt.Sprint(cfg.Port)))
	dsn := pgtest.WithParam(pgtest.WithParam(url, "host", "127.0.0.1"), "port", proxy.port())
	d := newDriverIn(t, dsn, fmt.Sprintf("oke_test_%d_%d", os.Getpid(), schemaSeq.Add(1)))
	table := pgx.Identifier{d.Schema(), "charges"}.Sanitize()
	if _, err := d.Pool().Exec(t.Context(), `CREATE TABLE `+table+` (id bigserial PRIMARY KEY, amount int NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	var pauseBeforeCommit atomic.Bool
	app := oke.New(oke.Config{Driver: d, StoreTimeout: 300 * time.Millisecond, Lease: 2 * time.Second, SweepInterval: -1, PollInterval: -1,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	type in struct {
		Amount int `json:"amount"`
	}
	type charge struct {
		ID     int64 `json:"id"`
		Amount int   `json:"amount"`
	}
	app.Handle(oke.POST("/charges"), oke.NewFlow("pg.hung.charge", oke.Options{Idempotency: oke.Required},
		func(ctx context.Context, in in, fx *oke.Fx) (oke.Response[charge], error) {
			tx, err := fx.Tx(ctx)
			if err != nil {
				return oke.Response[charge]{}, err
			}
			c := charge{Amount: in.Amount}
			if err := tx.QueryRow(ctx, `INSERT INTO `+table+` (amount) VALUES ($1) RETURNING id`, in.Amount).Scan(&c.ID); err != nil {
				return oke.Response[charge]{}, err
			}
			if pauseBeforeCommit.CompareAndSwap(true, false) {
				proxy.Pause() // the server hangs between the flow's write and its COMMIT
			}
			return oke.Created(c, ""), nil
		}))
	if err := app.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Close(context.Background()) })
	post := func(key string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", "/charges", strings.NewReader(`{"amount":700}`))
		r.Header.Set("Idempotency-Key", key)
		w := httptest.NewRecorder()
		app.ServeHTTP(w, r)
		return w
	}

	acked := post("hung-pg-acked-0001")
	if acked.Code != http.StatusCreated {
		t.Fatalf("before the hang: %d %s", acked.Code, acked.Body)
	}

	proxy.Pause()
	for _, key := range []string{"hung-pg-new-0001", "hung-pg-acked-0001"} {
		// Each answer comes at the store's deadline; a request with no
		// deadline would wait here for as long as the proxy is paused,
		// and the test would time out.
		w := post(key)
		if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), `"code":"StoreUnavailable"`) || w.Header().Get("Retry-After") == "" {
			t.Fatalf("%s while the server hangs: %d %v %s, want 503 StoreUnavailable with Retry-After", key, w.Code, w.Header(), w.Body)
		}
	}
	proxy.Resume()

	again := post("hung-pg-acked-0001")
	if again.Code != http.StatusCreated || again.Header().Get("Idempotent-Replayed") != "true" || again.Body.String() != acked.Body.String() {
		t.Fatalf("the acknowledged key after the hang: %d %s, want its first answer %s replayed", again.Code, again.Body, acked.Body)
	}
	retried := post("hung-pg-new-0001")
	if retried.Code != http.StatusCreated || retried.Header().Get("Idempotent-Replayed") == "true" {
		t.Fatalf("the key refused during the hang, retried: %d %s, want it to run now", retried.Code, retried.Body)
	}

	// The server hangs after the flow wrote, before its COMMIT (with the
	// stored response) answered: the outcome is unknown, and said so at
	// the deadline.
	pauseBeforeCommit.Store(true)
	w := post("hung-pg-commit-0001")
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), `"code":"OutcomeUnknown"`) || w.Header().Get("Retry-After") == "" {
		t.Fatalf("a COMMIT on the hung server: %d %v %s, want 503 OutcomeUnknown with Retry-After", w.Code, w.Header(), w.Body)
	}
	proxy.Resume() // the COMMIT never reached the server: nothing of it stands
	w = post("hung-pg-commit-0001")
	if w.Code == http.StatusConflict {
		// The claim went on its own (not with the flow's first statement):
		// its row holds the key, honestly in progress, until its lease
		// lapses; then the retry takes it over.
		waitLapsed(t, d, driver.Key{Tenant: "default", Principal: "anon", Flow: "pg.hung.charge", Key: "hung-pg-commit-0001"})
		w = post("hung-pg-commit-0001")
	}
	if w.Code != http.StatusCreated || w.Header().Get("Idempotent-Replayed") == "true" {
		t.Fatalf("the key whose COMMIT hung, retried: %d %s, want it to run now", w.Code, w.Body)
	}
	again = post("hung-pg-commit-0001")
	if again.Code != http.StatusCreated || again.Header().Get("Idempotent-Replayed") != "true" || again.Body.String() != w.Body.String() {
		t.Fatalf("its replay: %d %s, want %s replayed", again.Code, again.Body, w.Body)
	}

	var n int
	if err := d.Pool().QueryRow(t.Context(), `SELECT count(*) FROM `+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Fatalf("charges = %d, want 3 (one a key: none lost, none doubled)", n)
	}
}

// waitLapsed waits until the row of key is no longer held by a live lease,
// by the store's clock.
func waitLapsed(t *testing.T, d *postgres.Driver, key driver.Key) {
	t.Helper()
	for {
		row, err := d.Get(t.Context(), key)
		if err != nil || row.State != driver.Running {
			return
		}
		var lapsed bool
		if err := d.Pool().QueryRow(t.Context(), `SELECT now() >= $1`, row.LeaseUntil).Scan(&lapsed); err != nil {
			t.Fatal(err)
		}
		if lapsed {
			return
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-t.Context().Done():
			t.Fatal("the row's lease never lapsed")
		}
	}
}
