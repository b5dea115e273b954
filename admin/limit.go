package admin

import (
	"container/list"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// Limits bound how fast one client may guess the admin token. A client is
// one IP address (an IPv6 client is its /64, which one host usually holds
// whole), as ClientIP finds it.
//
// A refused credential (a wrong bearer token, a wrong token in the login
// form, a cookie shaped like a session whose signature is wrong) is a
// failure; a request with no credential at all, with a real session cookie
// that expired or was logged out, or with a cookie that is no session at
// all (it could never be let in) is not a guess and is not counted. With an
// Auth other than Token, a 401 of a request that sent an Authorization
// header is a failure. The first Free
// failures are answered 401 only; the Free-th and each later one block the
// client for Base, then twice that, and so on up to Max; while blocked,
// every admin request from that client is 429 Too Many Requests with
// Retry-After (its credential not even checked), except one carrying a
// valid console session. A client's failures are forgotten an hour after
// its last one (a success does not forget them: an attacker sharing an
// address with an admin gains no tries from the admin's requests).
//
// At most Clients clients are remembered; past that the one seen longest
// ago is forgotten, so the limiter's memory is bounded whatever the flood.
type Limits struct {
	Free    int           // failures allowed before the first block; default 5
	Base    time.Duration // the first block; default 1s
	Max     time.Duration // the longest block; default 10m
	Clients int           // clients remembered; default 10000
}

func (l Limits) withDefaults() Limits {
	if l.Free <= 0 {
		l.Free = 5
	}
	if l.Base <= 0 {
		l.Base = time.Second
	}
	if l.Max < l.Base {
		l.Max = max(10*time.Minute, l.Base)
	}
	if l.Clients <= 0 {
		l.Clients = 10000
	}
	return l
}

// forgetAfter is how long after a client's last failure its count is
// forgotten.
const forgetAfter = time.Hour

// limiter counts admin auth failures per client: a map bounded by an LRU
// list.
type limiter struct {
	lim Limits
	mu  sync.Mutex
	m   map[string]*list.Element // of *client
	lru *list.List               // front: touched most recently
}

type client struct {
	id       string
	failures int
	last     time.Time // the last failure
	until    time.Time // blocked until
	shed     int       // requests refused 429 since the last failure logged
}

func newLimiter(l Limits) *limiter {
	return &limiter{lim: l.withDefaults(), m: map[string]*list.Element{}, lru: list.New()}
}

// get returns id's entry, if any, forgetting it when its failures are old.
// l.mu is held.
func (l *limiter) get(id string, now time.Time) *client {
	e, ok := l.m[id]
	if !ok {
		return nil
	}
	c := e.Value.(*client)
	if now.Sub(c.last) >= forgetAfter && !now.Before(c.until) {
		l.lru.Remove(e)
		delete(l.m, id)
		return nil
	}
	l.lru.MoveToFront(e)
	return c
}

// blocked reports how long id must still wait, zero when it may try; a
// blocked request is counted as shed.
func (l *limiter) blocked(id string, now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.get(id, now)
	if c == nil || !now.Before(c.until) {
		return 0
	}
	c.shed++
	return c.until.Sub(now)
}

// fail counts a failure of id and returns its count, the block it now
// serves (zero while within Free), and how many of its requests were shed
// since its last failure.
func (l *limiter) fail(id string, now time.Time) (failures int, block time.Duration, shed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.get(id, now)
	if c == nil {
		if l.lru.Len() >= l.lim.Clients {
			old := l.lru.Back()
			l.lru.Remove(old)
			delete(l.m, old.Value.(*client).id)
		}
		c = &client{id: id}
		l.m[id] = l.lru.PushFront(c)
	}
	c.failures++
	c.last = now
	shed, c.shed = c.shed, 0
	if c.failures >= l.lim.Free {
		block = l.lim.Base
		for i := l.lim.Free; i < c.failures && block < l.lim.Max; i++ {
			block *= 2
		}
		block = min(block, l.lim.Max)
		c.until = now.Add(block)
	}
	return c.failures, block, shed
}

// ClientIP is how Handler tells clients apart by default: the address the
// connection came from (http.Request.RemoteAddr), an IPv6 address reduced
// to its /64. It trusts no header: behind a reverse proxy every client is
// the proxy unless TrustForwardedFor says which proxies to believe.
func ClientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return clientOf(host)
}

func clientOf(host string) string {
	a, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	a = a.Unmap().WithZone("")
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}

// forwardedFor returns ClientIP's rule behind the proxies in trusted: when
// the connection comes from one of them, the client is the right-most
// X-Forwarded-For address that is not a trusted proxy (addresses to its
// left were written by the client and prove nothing).
func forwardedFor(trusted []netip.Prefix) func(*http.Request) string {
	isTrusted := func(s string) bool {
		a, err := netip.ParseAddr(strings.TrimSpace(s))
		if err != nil {
			return false
		}
		a = a.Unmap()
		for _, p := range trusted {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
	return func(r *http.Request) string {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			host = r.RemoteAddr
		}
		if !isTrusted(host) {
			return clientOf(host)
		}
		hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
		for i := len(hops) - 1; i >= 0; i-- {
			h := strings.TrimSpace(hops[i])
			if h == "" || isTrusted(h) {
				continue
			}
			if _, err := netip.ParseAddr(h); err != nil {
				break // garbage: fall back to the proxy itself
			}
			return clientOf(h)
		}
		return clientOf(host)
	}
}
