package admin

import (
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"
)

// TestAdminSessionExpires: a session cookie is good until its expiry, not
// after, not with another token, and not with an expiry past the session
// length (a forged long-lived one would need the MAC anyway).
func TestAdminSessionExpires(t *testing.T) {
	a := Token("0123456789abcdef").(*tokenAuth)
	other := Token("fedcba9876543210").(*tokenAuth)
	now := time.Now()
	v := a.session(now.Add(time.Hour))
	for _, tc := range []struct {
		name string
		auth *tokenAuth
		v    string
		at   time.Time
		ok   bool
	}{
		{"before its expiry", a, v, now, true},
		{"after its expiry", a, v, now.Add(2 * time.Hour), false},
		{"under another token", other, v, now, false},
		{"with its expiry changed", a, "1" + v, now, false},
		{"longer than a session lasts", a, a.session(now.Add(48 * time.Hour)), now, false},
		{"not a session at all", a, "garbage", now, false},
	} {
		if got := tc.auth.validSession(tc.v, tc.at) == sessionValid; got != tc.ok {
			t.Errorf("%s: valid = %v, want %v", tc.name, got, tc.ok)
		}
	}
}

// TestAdminRevocationsAreBounded: the set of logged-out sessions never
// holds more than its bound; when it is full of live sessions, every session
// open then is ended (none let in again), and a session made after works.
func TestAdminRevocationsAreBounded(t *testing.T) {
	a := Token("0123456789abcdef").(*tokenAuth)
	a.revoked = newRevocations(3)
	now := time.Now()
	var open []string
	for i := 0; i < 5; i++ {
		open = append(open, a.session(now.Add(sessionTTL)))
	}
	for _, v := range open[:4] {
		a.logout(v, now)
	}
	if len(a.revoked.m) > 3 {
		t.Fatalf("%d revocations kept, bound 3", len(a.revoked.m))
	}
	for i, v := range open {
		if a.validSession(v, now) == sessionValid {
			t.Errorf("session %d is valid after the revocations overflowed", i)
		}
	}
	later := now.Add(2 * time.Second)
	if v := a.session(later.Add(sessionTTL)); a.validSession(v, later) != sessionValid {
		t.Fatal("a session made after the overflow is not valid")
	}
	// Expired revocations make room before anything is ended wholesale.
	b := Token("0123456789abcdef").(*tokenAuth)
	b.revoked = newRevocations(2)
	short := b.session(now.Add(time.Minute))
	b.logout(short, now)
	b.logout(b.session(now.Add(time.Minute)), now)
	keep := b.session(now.Add(sessionTTL))
	b.logout(b.session(now.Add(sessionTTL)), now.Add(2*time.Minute))
	if b.validSession(keep, now.Add(2*time.Minute)) != sessionValid {
		t.Fatal("an open session was ended although expired revocations could be dropped")
	}
}

// TestAdminLimiterIsBounded: the limiter remembers at most Clients clients
// (the one seen longest ago goes), and forgets a client's failures an hour
// after its last one.
func TestAdminLimiterIsBounded(t *testing.T) {
	l := newLimiter(Limits{Free: 2, Clients: 3})
	now := time.Now()
	for _, id := range []string{"a", "b", "c", "d"} {
		l.fail(id, now)
	}
	if len(l.m) != 3 || l.lru.Len() != 3 || l.m["a"] != nil {
		t.Fatalf("%d clients kept (%v), want 3 without a", len(l.m), l.m)
	}
	if n, block, _ := l.fail("b", now); n != 2 || block != time.Second {
		t.Fatalf("b's second failure: %d, blocked %v", n, block)
	}
	if l.blocked("b", now) != time.Second || l.blocked("c", now) != 0 {
		t.Fatal("b should be blocked for 1s, c not")
	}
	if n, _, _ := l.fail("b", now.Add(forgetAfter+time.Second)); n != 1 {
		t.Fatalf("b's failures were not forgotten after an hour: %d", n)
	}
}

// TestClientIP: the connection's address by default (an IPv6 one as its
// /64), whatever X-Forwarded-For says; behind a trusted proxy, the
// right-most untrusted address of X-Forwarded-For.
func TestClientIP(t *testing.T) {
	trusted := forwardedFor([]netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")})
	for _, tc := range []struct {
		remote, xff string
		def, behind string
	}{
		{"192.0.2.1:80", "", "192.0.2.1", "192.0.2.1"},
		{"192.0.2.1:80", "203.0.113.5", "192.0.2.1", "192.0.2.1"},
		{"[2001:db8:1:2:3:4:5:6]:80", "", "2001:db8:1:2::/64", "2001:db8:1:2::/64"},
		{"10.1.2.3:80", "198.51.100.1, 203.0.113.5", "10.1.2.3", "203.0.113.5"},
		{"10.1.2.3:80", "203.0.113.5, 10.9.9.9", "10.1.2.3", "203.0.113.5"},
		{"10.1.2.3:80", "", "10.1.2.3", "10.1.2.3"},
		{"10.1.2.3:80", "garbage", "10.1.2.3", "10.1.2.3"},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tc.remote
		if tc.xff != "" {
			r.Header.Set("X-Forwarded-For", tc.xff)
		}
		if got := ClientIP(r); got != tc.def {
			t.Errorf("ClientIP(%s, XFF %q) = %s, want %s", tc.remote, tc.xff, got, tc.def)
		}
		if got := trusted(r); got != tc.behind {
			t.Errorf("behind 10/8: (%s, XFF %q) = %s, want %s", tc.remote, tc.xff, got, tc.behind)
		}
	}
}

// TestAdminLimiterBlocksGrowToTheMax: each failure past Free doubles the
// block, never past Max, however many there are (no overflow).
func TestAdminLimiterBlocksGrowToTheMax(t *testing.T) {
	l := newLimiter(Limits{Free: 1, Base: time.Second, Max: time.Minute})
	now := time.Now()
	var got []time.Duration
	for i := 0; i < 200; i++ {
		_, block, _ := l.fail("x", now)
		got = append(got, block)
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second, time.Minute}
	for i, w := range want {
		if got[i] != w {
			t.Fatalf("block %d = %v, want %v (all: %v)", i+1, got[i], w, got[:len(want)])
		}
	}
	if got[199] != time.Minute {
		t.Fatalf("the 200th block is %v, want the max", got[199])
	}
}
