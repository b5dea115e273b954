package admin

import (
	"log/slog"
	"net/http"
	"net/netip"
	"time"
)

// An Option tunes Handler.
type Option func(*options)

type options struct {
	log      *slog.Logger
	clientIP func(*http.Request) string
	limits   Limits
	now      func() time.Time
}

// WithLogger sends Handler's log lines (one per refused credential, never
// the credential itself) to l instead of the app's logger (oke.App.Logger).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithLimits sets how fast one client may guess the admin token (Limits;
// zero fields keep their defaults).
func WithLimits(l Limits) Option { return func(o *options) { o.limits = l } }

// WithClientIP sets how Handler tells clients apart for its limits: f
// returns a client's identity (an address). The default is ClientIP, the
// connection's address, which trusts no header. A function that believes a
// header a client can write itself lets a guesser pick a new identity per
// guess.
func WithClientIP(f func(*http.Request) string) Option {
	return func(o *options) { o.clientIP = f }
}

// TrustForwardedFor tells Handler it runs behind the reverse proxies in
// proxies: a request whose connection comes from one of them is the client
// named by the right-most address of X-Forwarded-For that is not one of
// them. A request from anywhere else is its connection's address, whatever
// its headers say.
//
//	admin.Handler(app, auth, admin.TrustForwardedFor(netip.MustParsePrefix("10.0.0.0/8")))
func TrustForwardedFor(proxies ...netip.Prefix) Option {
	return func(o *options) { o.clientIP = forwardedFor(proxies) }
}

// WithClock sets the clock Handler's limits and sessions read (time.Now by
// default): for tests that move time on instead of sleeping.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }
