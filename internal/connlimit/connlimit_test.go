package connlimit_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/okengine/oke/internal/connlimit"
)

// server serves h through a Limiter of max connections. idle receives a
// value each time a connection goes idle (after its answer), so a test can
// wait for the server to see it idle instead of sleeping.
type server struct {
	l    *connlimit.Limiter
	addr string
	idle chan struct{}
}

func setup(t *testing.T, max int, h http.Handler) *server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{l: connlimit.New(max), addr: ln.Addr().String(), idle: make(chan struct{}, 1000)}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: time.Minute, IdleTimeout: time.Hour,
		ConnState: func(c net.Conn, st http.ConnState) {
			s.l.ConnState(c, st)
			if st == http.StateIdle {
				s.idle <- struct{}{}
			}
		}}
	go srv.Serve(s.l.Listener(ln))
	t.Cleanup(func() { srv.Close() })
	return s
}

var ok = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })

// client is one raw keep-alive connection.
type client struct {
	c  net.Conn
	br *bufio.Reader
}

func (s *server) dial(t *testing.T) *client {
	t.Helper()
	c, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &client{c, bufio.NewReader(c)}
}

// get sends GET / and reads the answer: its status, or an error when the
// server closed the connection instead. A minute is the safety net.
func (c *client) get() (int, error) {
	c.c.SetDeadline(time.Now().Add(time.Minute))
	if _, err := io.WriteString(c.c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// closedByServer reports whether the server closed c (EOF or a reset),
// failing on a timeout.
func closedByServer(t *testing.T, c *client) {
	t.Helper()
	c.c.SetReadDeadline(time.Now().Add(time.Minute))
	_, err := c.br.ReadByte()
	if errors.Is(err, os.ErrDeadlineExceeded) || err == nil {
		t.Fatalf("the server did not close the connection: %v", err)
	}
	if err != io.EOF && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read: %v", err)
	}
}

// A flood of idle keep-alive connections: past the cap, each new one takes
// the place of the longest idle, so fresh clients are answered and no more
// than the cap stay open.
func TestIdleFloodMakesRoom(t *testing.T) {
	const max, flood = 5, 40
	s := setup(t, max, ok)
	var cs []*client
	for range flood {
		c := s.dial(t)
		if st, err := c.get(); err != nil || st != 200 {
			t.Fatalf("request %d: %d %v", len(cs), st, err)
		}
		<-s.idle // the server sees it idle before the next one comes
		cs = append(cs, c)
		if st := s.l.Stats(); st.Open > max {
			t.Fatalf("%d connections open, cap %d", st.Open, max)
		}
	}
	if st, err := s.dial(t).get(); err != nil || st != 200 {
		t.Fatalf("a fresh client after the flood: %d %v", st, err)
	}
	answered := 0
	for _, c := range cs {
		if _, err := c.get(); err == nil {
			answered++
		}
	}
	st := s.l.Stats()
	if answered > max-1 || st.Open > max || st.Evicted != flood+1-max || st.Refused != 0 {
		t.Fatalf("%d of the flood's connections still answer, stats %+v; cap %d", answered, st, max)
	}
}

// When every connection is busy, a new one is closed at once: it does not
// wait for room, and the busy ones are untouched.
func TestBusyRefusesAtOnce(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 2)
	s := setup(t, 2, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" {
			started <- struct{}{}
			<-release
		}
		io.WriteString(w, "ok")
	}))
	busy := []*client{s.dial(t), s.dial(t)}
	done := make(chan error, 2)
	for _, c := range busy {
		go func() { _, err := c.get(); done <- err }()
		<-started
	}
	closedByServer(t, s.dial(t))
	if st := s.l.Stats(); st.Refused != 1 || st.Open != 2 {
		t.Fatalf("stats %+v, want 1 refused, 2 open", st)
	}
	close(release)
	for range busy {
		if err := <-done; err != nil {
			t.Fatalf("a busy connection's answer: %v", err)
		}
	}
	<-s.idle
	if st, err := s.dial(t).get(); err != nil || st != 200 {
		t.Fatalf("once a connection is idle, a new one gets in: %d %v", st, err)
	}
}

// Connections that never send a request hold no place a new client needs:
// the oldest is closed to make room.
func TestSilentConnectionsMakeRoom(t *testing.T) {
	s := setup(t, 2, ok)
	first, _ := s.dial(t), s.dial(t)
	// The listener counted both only once it accepted them; a request on a
	// third connection is the first thing we can await.
	if st, err := s.dial(t).get(); err != nil || st != 200 {
		t.Fatalf("a client past two silent connections: %d %v", st, err)
	}
	closedByServer(t, first)
}

// errListener fails its first Accept with EMFILE.
type errListener struct {
	net.Listener
	failed bool
}

func (l *errListener) Accept() (net.Conn, error) {
	if !l.failed {
		l.failed = true
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// An accept error (EMFILE) is passed through unchanged, temporary, for
// http.Server.Serve to back off on and go on serving.
func TestAcceptErrorPassesThrough(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := connlimit.New(1)
	wrapped := l.Listener(&errListener{Listener: ln})
	_, err = wrapped.Accept()
	var ne net.Error
	if !errors.Is(err, syscall.EMFILE) || !errors.As(err, &ne) || !ne.Temporary() { //nolint:staticcheck // what Serve checks
		t.Fatalf("err %v, want the temporary EMFILE", err)
	}
	srv := &http.Server{Handler: ok, ConnState: l.ConnState}
	go srv.Serve(wrapped)
	defer srv.Close()
	resp, err := http.Get("http://" + ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}
