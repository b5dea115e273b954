package admin

import (
	"testing"
	"time"
)

// TestAdminSessionExpires: a session cookie is good until its expiry, not
// after, not with another token, and not with an expiry past the session
// length (a forged long-lived one would need the MAC anyway).
func TestAdminSessionExpires(t *testing.T) {
	a := &tokenAuth{token: []byte("0123456789abcdef")}
	other := &tokenAuth{token: []byte("fedcba9876543210")}
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
		if got := tc.auth.validSession(tc.v, tc.at); got != tc.ok {
			t.Errorf("%s: valid = %v, want %v", tc.name, got, tc.ok)
		}
	}
}
