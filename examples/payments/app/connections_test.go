package app_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/okengine/oke/examples/payments/app"
)

// dial opens a raw TCP connection to e's server.
func (e *env) dial(t *testing.T) net.Conn {
	t.Helper()
	u, err := url.Parse(e.url)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// untilClosed reads r, which reads conn, until the server closes the
// connection (EOF or a reset) and returns what it read. A minute is the
// safety net: a server that keeps the connection that long fails the test.
func untilClosed(t *testing.T, conn net.Conn, r io.Reader) []byte {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(time.Minute))
	b, err := io.ReadAll(r)
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		t.Fatalf("the server still holds the connection after a minute (read %q)", b)
	case err != nil && !errors.Is(err, syscall.ECONNRESET):
		t.Fatalf("read until the server closes: %v (read %q)", err, b)
	}
	return b
}

// readReply reads one HTTP answer (to a request with method) from br.
func readReply(t *testing.T, br *bufio.Reader, method string) reply {
	t.Helper()
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		t.Fatalf("read the answer: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read the answer's body: %v", err)
	}
	return reply{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// The connection bounds of DESIGN.md 6.1, on the demo's own http.Server
// (Server.HTTPServer, which Run serves with) with short bounds: idle, slow
// and stalled connections are closed by the server; streams and the live
// feed are exempt from the write deadline.
func TestConnectionBounds(t *testing.T) {
	const bound = time.Second
	e := setup(t, func(c *app.Config) {
		c.ReadHeaderTimeout, c.ReadTimeout, c.WriteTimeout, c.IdleTimeout = bound, bound, bound, bound
	})

	t.Run("an idle keep-alive connection is closed by the server", func(t *testing.T) {
		conn := e.dial(t)
		io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: demo\r\n\r\n")
		br := bufio.NewReader(conn)
		readReply(t, br, "GET").want(t, 200, "")
		if rest := untilClosed(t, conn, br); len(rest) != 0 {
			t.Fatalf("the idle connection got %q", rest)
		}
	})

	t.Run("a request whose headers stall is cut off", func(t *testing.T) {
		conn := e.dial(t)
		io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: demo\r\n") // the blank line never comes
		untilClosed(t, conn, conn)
	})

	t.Run("a request whose body stalls is cut off, and stores and writes nothing", func(t *testing.T) {
		conn := e.dial(t)
		fmt.Fprintf(conn, "POST /notes HTTP/1.1\r\nHost: demo\r\nContent-Type: application/json\r\n"+
			"Idempotency-Key: %s\r\nContent-Length: 100\r\n\r\n{", newKey())
		br := bufio.NewReader(conn)
		if got := untilClosed(t, conn, br); len(got) > 0 {
			// An answer before the close must be an error envelope.
			r := readReply(t, bufio.NewReader(strings.NewReader(string(got))), "POST")
			if r.Status < 400 {
				t.Fatalf("a stalled body got %d %s", r.Status, r.Body)
			}
			t.Logf("before closing, the server answered %d %s", r.Status, r.errorCode(t))
		}
		if n := e.count("notes"); n != 0 {
			t.Fatalf("%d notes written from a stalled body", n)
		}
	})

	t.Run("a body trickled a byte at a time is cut off", func(t *testing.T) {
		conn := e.dial(t)
		const size = 1000 // at a byte per 100ms, 100s: far past the read timeout
		fmt.Fprintf(conn, "POST /notes HTTP/1.1\r\nHost: demo\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", size)
		stop := make(chan struct{})
		trickled := make(chan int, 1)
		go func() {
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			n := 0
			defer func() { trickled <- n }()
			for ; n < size; n++ {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				if _, err := conn.Write([]byte(" ")); err != nil {
					return
				}
			}
		}()
		untilClosed(t, conn, conn)
		close(stop)
		if n := <-trickled; n >= size {
			t.Fatalf("the whole trickled body (%d bytes) was accepted", n)
		}
	})

	t.Run("headers over MaxHeaderBytes are refused with 431", func(t *testing.T) {
		r := e.do("GET", "/healthz", "", "X-Big", strings.Repeat("b", app.DefaultConfig().MaxHeaderBytes+8<<10))
		if r.Status != http.StatusRequestHeaderFieldsTooLarge {
			t.Fatalf("status %d, want 431", r.Status)
		}
	})

	t.Run("the live /events feed outlives the write timeout", func(t *testing.T) {
		_, feed := openFeed(t, e)
		next(t, feed) // ready: the feed's request was read before this
		// The server's own clock: an idle connection opened now is closed
		// IdleTimeout (= WriteTimeout) later, so by then the feed has been
		// open longer than the write timeout.
		conn := e.dial(t)
		io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: demo\r\n\r\n")
		br := bufio.NewReader(conn)
		readReply(t, br, "GET").want(t, 200, "")
		untilClosed(t, conn, br)
		e.do("POST", "/notes", `{"text":"still here"}`).want(t, 201, "")
		if ev := next(t, feed); ev.name != "note.created" || !strings.Contains(ev.data, "still here") {
			t.Fatalf("event %+v, want note.created", ev)
		}
	})

	t.Run("a /export stream outlives the write timeout", func(t *testing.T) {
		// Three lines 1.5s apart: the stream lasts 3s, the bound is 1s.
		resp, err := http.Post(e.url+"/export", "application/json", strings.NewReader(`{"lines":3,"delayMs":1500}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		if lines := readLines(t, resp); len(lines) != 3 || !strings.HasPrefix(lines[2], `{"line":3,"of":3,`) {
			t.Fatalf("lines %q, want all 3", lines)
		}
	})

	t.Run("an ordinary answer that outruns the write timeout is cut off; a retry with its key replays it", func(t *testing.T) {
		key := newKey()
		body := `{"ms":2500}` // 2.5s: past the 1s bound
		c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		if r, err := send(c, "POST", e.url+"/slow", body, "Idempotency-Key", key); err == nil {
			t.Fatalf("the answer arrived past the write timeout: %d %s", r.Status, r.Body)
		}
		r := e.do("POST", "/slow", body, "Idempotency-Key", key)
		r.want(t, 201, "")
		if !r.replayed() {
			t.Fatal("the retry ran the flow again instead of replaying its stored answer")
		}
		if n := e.count("slow_rows"); n != 1 {
			t.Fatalf("%d slow rows, want 1", n)
		}
	})
}

// issue 21 (2): a flood of keep-alive connections, each of which sent one
// request and stays idle, does not take the server down — past -max-conns
// a new connection takes the place of the longest-idle one, so /healthz
// and a fresh client's charge are answered and the server holds no more
// than the cap. (Without the cap all 200 stay open; at ~20 000 the process
// ran out of file descriptors and new clients got no answer.)
func TestKeepAliveFloodIsCapped(t *testing.T) {
	const maxConns, flood = 50, 200
	var logs syncBuffer
	s := openDemo(t, newConfig(t, func(c *app.Config) {
		c.MaxConns = maxConns
		c.IdleTimeout = time.Hour // the flood's connections never time out here
		c.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(&logs, t.Output()), &slog.HandlerOptions{Level: slog.LevelWarn}))
	}))
	idle := make(chan struct{}, 4*flood)
	hs := httptest.NewUnstartedServer(nil)
	hs.Listener = s.Listener(hs.Listener)
	hs.Config = s.HTTPServer()
	track := hs.Config.ConnState
	hs.Config.ConnState = func(c net.Conn, st http.ConnState) {
		track(c, st)
		if st == http.StateIdle {
			idle <- struct{}{}
		}
	}
	hs.Start()
	t.Cleanup(func() {
		s.Shutdown()
		hs.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Close(ctx)
	})
	e := &env{t: t, srv: s, url: hs.URL}

	get := func(conn net.Conn, br *bufio.Reader, path string) (int, error) {
		conn.SetDeadline(time.Now().Add(time.Minute)) // the safety net
		if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: demo\r\n\r\n", path); err != nil {
			return 0, err
		}
		resp, err := http.ReadResponse(br, &http.Request{Method: "GET"})
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		_, err = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, err
	}
	type client struct {
		conn net.Conn
		br   *bufio.Reader
	}
	var cs []client
	for i := range flood {
		conn := e.dial(t)
		br := bufio.NewReader(conn)
		if st, err := get(conn, br, "/whoami"); err != nil || st != 200 {
			t.Fatalf("the flood's request %d: %d %v", i, st, err)
		}
		<-idle // the server has seen it idle: the next one may take its place
		cs = append(cs, client{conn, br})
		if open, _ := s.Conns(); open > maxConns {
			t.Fatalf("%d connections open after %d, cap %d", open, i+1, maxConns)
		}
	}

	conn := e.dial(t)
	if st, err := get(conn, bufio.NewReader(conn), "/healthz"); err != nil || st != 200 {
		t.Fatalf("/healthz during the flood: %d %v", st, err)
	}
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	r, err := send(c, "POST", e.url+"/charges", `{"amount":1000,"currency":"usd"}`, "Idempotency-Key", newKey())
	if err != nil {
		t.Fatalf("a fresh client's charge during the flood: %v", err)
	}
	r.want(t, 201, "")

	// Which of the flood's connections does the server still hold? Each
	// one it keeps answers; each it closed fails.
	held := 0
	for _, c := range cs {
		if _, err := get(c.conn, c.br, "/whoami"); err == nil {
			held++
		}
	}
	if open, _ := s.Conns(); held > maxConns || open > maxConns {
		t.Fatalf("the server still holds %d of the flood's %d connections (%d open in all), cap %d", held, flood, open, maxConns)
	}
	// The operator hears of it — at most once a minute, not once for each
	// of the 150 connections that arrived at the cap.
	if n := strings.Count(logs.String(), "at the connection cap"); n < 1 || n >= flood-maxConns {
		t.Fatalf("%d warnings about the cap, want a few:\n%s", n, logs.String())
	}
}

// Run (and so the demo's command and `oke serve`) serves on the capped
// listener: with -max-conns 1, a second client gets in by taking the idle
// first connection's place.
func TestRunCapsConnections(t *testing.T) {
	base, _ := runMain(t, "-max-conns", "1", "-idle-timeout", "1h", "-admin-token-file", writeToken(t))
	u, _ := url.Parse(base)
	get := func(conn net.Conn) error {
		conn.SetDeadline(time.Now().Add(time.Minute)) // the safety net
		if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: demo\r\n\r\n"); err != nil {
			return err
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	}
	first, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if err := get(first); err != nil {
		t.Fatal(err)
	}
	// Until the server has marked the first connection idle, a second one
	// is refused (closed at once): try again until one gets in.
	for i := 0; ; i++ {
		second, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		err = get(second)
		second.Close()
		if err == nil {
			break
		}
		if i == 1000 {
			t.Fatalf("no second connection got in: %v", err)
		}
	}
	first.SetReadDeadline(time.Now().Add(time.Minute))
	if n, err := first.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the first connection is still open (read %d, %v)", n, err)
	}
}

// writeToken writes an admin token file for a demo the test starts.
func writeToken(t *testing.T) string {
	t.Helper()
	p := t.TempDir() + "/token"
	if err := os.WriteFile(p, []byte("a-test-token-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// issue 21 (2), as it happened: a demo process whose open-file limit is
// far below the flood (ulimit -n 300; 600 idle keep-alive connections)
// lowers its default -max-conns to fit, never runs out of file
// descriptors, and answers fresh clients throughout. Without the cap
// accept fails with EMFILE past ~290 connections and new clients hang.
func TestProcessSurvivesAFloodPastItsFileLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the demo binary")
	}
	const limit, flood = 300, 600
	bin := buildDemo(t)
	p := startProc(t, "/bin/sh", "-c", `ulimit -n `+strconv.Itoa(limit)+` && exec "$0" "$@"`, bin,
		"-addr", "127.0.0.1:0", "-data", t.TempDir(), "-admin-token-file", writeToken(t), "-idle-timeout", "1h")
	u, err := url.Parse(waitListening(t, p.stderr, p.done))
	if err != nil {
		t.Fatal(err)
	}
	type client struct {
		conn net.Conn
		br   *bufio.Reader
	}
	get := func(c client, path string) error {
		c.conn.SetDeadline(time.Now().Add(time.Minute)) // the safety net: a server out of descriptors never answers
		if _, err := fmt.Fprintf(c.conn, "GET %s HTTP/1.1\r\nHost: demo\r\n\r\n", path); err != nil {
			return err
		}
		resp, err := http.ReadResponse(c.br, nil)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			return err
		}
		if resp.StatusCode != 200 {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
	// connect opens a connection and makes one request on it. Should every
	// connection be busy at the moment (the server not yet seeing the last
	// one idle), the new one is closed at once: it tries again.
	connect := func(path string) client {
		for i := 0; ; i++ {
			conn, err := net.Dial("tcp", u.Host)
			if err != nil {
				t.Fatal(err)
			}
			c := client{conn, bufio.NewReader(conn)}
			err = get(c, path)
			if err == nil {
				t.Cleanup(func() { conn.Close() })
				return c
			}
			conn.Close()
			if errors.Is(err, os.ErrDeadlineExceeded) || i == 100 {
				t.Fatalf("GET %s on a new connection: %v; stderr:\n%s", path, err, p.stderr)
			}
		}
	}
	var cs []client
	for range flood {
		cs = append(cs, connect("/whoami"))
	}
	connect("/healthz")
	held := 0
	for _, c := range cs {
		if get(c, "/whoami") == nil {
			held++
		}
	}
	stderr := p.stderr.String()
	if held >= limit || strings.Contains(stderr, "too many open files") || !strings.Contains(stderr, "-max-conns lowered") {
		t.Fatalf("the process holds %d of %d connections (open-file limit %d); stderr:\n%s", held, flood, limit, stderr)
	}
	t.Logf("the process holds %d of the flood's %d connections", held, flood)
}
