package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"
	"time"
)

// Client calls one oke HTTP API. It is safe for concurrent use; make one and
// share it.
type Client struct {
	base    string // base URL without a trailing slash
	http    *http.Client
	header  http.Header
	retry   Retry
	sleep   func(context.Context, time.Duration) error // waits between attempts; tests replace it
	rand    func() float64                             // jitter source in [0, 1); tests replace it
	now     func() time.Time
	optErrs []error
}

// Option configures a Client in [New].
type Option func(*Client)

// WithHTTPClient sets the *http.Client that sends requests (its Transport,
// Timeout, Jar, CheckRedirect). The default is a new client with
// [http.DefaultTransport] and no timeout: bound calls with their context, or
// set a Timeout here, which then applies to each attempt.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) {
		if hc == nil {
			c.optErrs = append(c.optErrs, errors.New("oke client: WithHTTPClient(nil)"))
			return
		}
		c.http = hc
	}
}

// WithHeader adds a header sent on every call, such as
// WithHeader("Authorization", "Bearer user:42"), WithHeader("X-Tenant", "acme")
// or WithHeader("X-API-Key", "k_1"). It may be given more than once. The
// Idempotency-Key header cannot be set this way: use [Key] per call.
func WithHeader(name, value string) Option {
	return func(c *Client) {
		if err := checkHeader(name); err != nil {
			c.optErrs = append(c.optErrs, err)
			return
		}
		c.header.Add(name, value)
	}
}

// WithRetry turns retries on with policy r. See [Retry] for what is
// retried and how long the client waits.
func WithRetry(r Retry) Option {
	return func(c *Client) {
		n, err := r.normalize()
		if err != nil {
			c.optErrs = append(c.optErrs, err)
			return
		}
		c.retry = n
	}
}

// New returns a Client for the API at baseURL, e.g. "https://api.example.com"
// or "http://127.0.0.1:8080/v1". Call paths are appended to it.
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("oke client: base URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("oke client: base URL %q: want http(s)://host[/prefix]", baseURL)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("oke client: base URL %q: must not have a query or fragment", baseURL)
	}
	c := &Client{
		base:   strings.TrimRight(baseURL, "/"),
		http:   &http.Client{},
		header: make(http.Header),
		retry:  Retry{MaxAttempts: 1, BaseDelay: DefaultBaseDelay, MaxDelay: DefaultMaxDelay},
		sleep:  sleepCtx,
		rand:   defaultRand,
		now:    time.Now,
	}
	for _, o := range opts {
		o(c)
	}
	if err := errors.Join(c.optErrs...); err != nil {
		return nil, err
	}
	c.optErrs = nil
	return c, nil
}

// checkHeader rejects header names the caller may not set directly.
func checkHeader(name string) error {
	if textproto.CanonicalMIMEHeaderKey(name) == HeaderIdempotencyKey {
		return errors.New("oke client: set the Idempotency-Key with client.Key, not as a header")
	}
	if name == "" || strings.ContainsAny(name, " :\r\n\t") {
		return fmt.Errorf("oke client: invalid header name %q", name)
	}
	return nil
}

// Meta describes the response to one call.
type Meta struct {
	// Status is the HTTP status of the last attempt; 0 if no response came.
	Status int
	// IdempotencyKey is the key sent (the same on every attempt); "" if none.
	IdempotencyKey string
	// IdempotentReplayed is true when the server answered with the stored
	// response of an earlier call with this key (Idempotent-Replayed: true):
	// the work was not done again.
	IdempotentReplayed bool
	// Attempts is how many times the request was sent; 0 if it never was.
	Attempts int
	// Location is the response's Location header, e.g. "/charges/ch_1".
	Location string
	// Header holds all response headers of the last attempt.
	Header http.Header
}

// Response is a raw answer from [Client.Do]: Meta plus the body bytes.
type Response struct {
	Meta
	Body []byte
}

// CallOption configures one call.
type CallOption func(*callConfig)

type keyMode uint8

const (
	keyAuto keyMode = iota // fresh key on non-GET/HEAD
	keyGiven
	keyNone
)

type callConfig struct {
	mode     keyMode
	key      string
	conflict bool // both Key and NoKey, or Key twice with different values
	query    url.Values
	params   map[string]string
	header   http.Header
	errs     []error
}

// Key sends key as the Idempotency-Key instead of a fresh one. Use it to
// keep one key across your own retries of one logical call (say, a checkout
// attempt stored in your database); the server then replays the first
// answer. The key must be 16–255 printable ASCII characters, or the call
// fails before sending with an error matching [ErrKeyInvalid]. An explicit
// key is sent with any method, GET included.
func Key(key string) CallOption {
	return func(cc *callConfig) {
		if cc.mode == keyNone || cc.mode == keyGiven && cc.key != key {
			cc.conflict = true
		}
		cc.mode, cc.key = keyGiven, key
	}
}

// NoKey sends no Idempotency-Key. The server then treats the call as new
// every time (or answers 400 IdempotencyKeyMissing if the flow requires a
// key), and the client does not retry a POST or PATCH sent this way.
func NoKey() CallOption {
	return func(cc *callConfig) {
		if cc.mode == keyGiven {
			cc.conflict = true
		}
		cc.mode = keyNone
	}
}

// Query adds query parameters to the URL. It may be given more than once;
// values accumulate.
func Query(q url.Values) CallOption {
	return func(cc *callConfig) {
		if cc.query == nil {
			cc.query = make(url.Values)
		}
		for k, vs := range q {
			cc.query[k] = append(cc.query[k], vs...)
		}
	}
}

// PathParam fills the segment "{name}" of the call's path with value,
// escaped with url.PathEscape: PathParam("id", "ch 1") turns "/charges/{id}"
// into "/charges/ch%201". Every {name} in the path needs a PathParam, and
// every PathParam needs a {name}; otherwise the call fails before sending.
func PathParam(name, value string) CallOption {
	return func(cc *callConfig) {
		if cc.params == nil {
			cc.params = make(map[string]string)
		}
		cc.params[name] = value
	}
}

// Header adds a header to this call only, on top of the client's
// [WithHeader] headers (it replaces a client header of the same name).
func Header(name, value string) CallOption {
	return func(cc *callConfig) {
		if err := checkHeader(name); err != nil {
			cc.errs = append(cc.errs, err)
			return
		}
		if cc.header == nil {
			cc.header = make(http.Header)
		}
		cc.header.Add(name, value)
	}
}

// request is one logical call, ready to send as many times as needed.
type request struct {
	method string
	path   string // expanded path, no query: for errors
	url    string
	header http.Header
	body   []byte
	retry  Retry
}

// prepare checks a call and builds what every attempt sends. Nothing is sent
// if it fails.
func (c *Client) prepare(method, path string, body []byte, opts []CallOption) (*request, error) {
	if method == "" || strings.ContainsAny(method, " \t\r\n/") {
		return nil, fmt.Errorf("oke client: invalid method %q", method)
	}
	var cc callConfig
	for _, o := range opts {
		o(&cc)
	}
	if err := errors.Join(cc.errs...); err != nil {
		return nil, err
	}
	if cc.conflict {
		return nil, errors.New("oke client: conflicting Key/NoKey options")
	}
	expanded, err := expandPath(path, cc.params)
	if err != nil {
		return nil, err
	}
	hasBody := method != http.MethodGet && method != http.MethodHead
	if !hasBody && len(body) > 0 {
		return nil, fmt.Errorf("oke client: %s %s: a %s request has no body; pass parameters with client.Query", method, expanded, method)
	}

	r := &request{method: method, path: expanded, header: c.header.Clone(), retry: c.retry}
	for k, vs := range cc.header {
		r.header[k] = vs
	}
	r.url = c.base + expanded
	if len(cc.query) > 0 {
		sep := "?"
		if strings.Contains(expanded, "?") {
			sep = "&"
		}
		r.url += sep + cc.query.Encode()
	}
	if _, err := url.Parse(r.url); err != nil {
		return nil, fmt.Errorf("oke client: %s %s: %w", method, expanded, err)
	}

	var key string
	switch cc.mode {
	case keyGiven:
		if err := ValidateKey(cc.key); err != nil {
			return nil, err
		}
		key = cc.key
	case keyAuto:
		if hasBody {
			key = NewKey()
		}
	}
	if key != "" {
		r.header.Set(HeaderIdempotencyKey, key)
	} else if !idempotentMethod(method) {
		r.retry.MaxAttempts = 1 // no key: a second POST could run twice
	}
	if r.header.Get("Accept") == "" {
		r.header.Set("Accept", "application/json")
	}
	if hasBody {
		r.body = body
		if body == nil {
			r.body = []byte{}
		}
		if len(body) > 0 && r.header.Get("Content-Type") == "" {
			r.header.Set("Content-Type", "application/json")
		}
	}
	return r, nil
}

// expandPath fills {name} segments from params.
func expandPath(path string, params map[string]string) (string, error) {
	if !strings.HasPrefix(path, "/") {
		return "", fmt.Errorf("oke client: path %q must start with /", path)
	}
	used := make(map[string]bool, len(params))
	var b strings.Builder
	rest := path
	for {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			if strings.IndexByte(rest, '}') >= 0 {
				return "", fmt.Errorf("oke client: path %q: unmatched }", path)
			}
			b.WriteString(rest)
			break
		}
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			return "", fmt.Errorf("oke client: path %q: unmatched {", path)
		}
		name := rest[i+1 : i+j]
		v, ok := params[name]
		if !ok {
			return "", fmt.Errorf("oke client: path %q: no PathParam for {%s}", path, name)
		}
		used[name] = true
		b.WriteString(rest[:i])
		b.WriteString(url.PathEscape(v))
		rest = rest[i+j+1:]
	}
	for name := range params {
		if !used[name] {
			return "", fmt.Errorf("oke client: path %q has no {%s} for its PathParam", path, name)
		}
	}
	return b.String(), nil
}

// Do sends one logical call with body as it is (JSON is assumed: the
// Content-Type is application/json unless set with [Header]) and returns the
// raw answer. Use [Call] or [Endpoint] for typed calls.
//
// On a 2xx answer the error is nil. On any other status Do returns both the
// Response and an *Error. On a network error, or when ctx ends, the Response
// has Status 0 and no body, but its Meta still tells the key sent and the
// attempts made. Do returns a nil Response only when nothing was sent: a bad
// path, option or key.
func (c *Client) Do(ctx context.Context, method, path string, body []byte, opts ...CallOption) (*Response, error) {
	r, err := c.prepare(method, path, body, opts)
	if err != nil {
		return nil, err
	}
	return c.send(ctx, r)
}

// send runs the attempts of one prepared call.
func (c *Client) send(ctx context.Context, r *request) (*Response, error) {
	meta := Meta{IdempotencyKey: r.header.Get(HeaderIdempotencyKey)}
	if err := ctx.Err(); err != nil {
		return &Response{Meta: meta}, fmt.Errorf("oke client: %s %s: not sent: %w", r.method, r.path, err)
	}
	for attempt := 1; ; attempt++ {
		meta.Attempts = attempt
		resp, err := c.attempt(ctx, r, meta)
		var wait time.Duration
		if err != nil {
			if ctx.Err() != nil { // the context ended mid-request
				return resp, c.stopped(r, ctx.Err(), err)
			}
			err = fmt.Errorf("oke client: %s %s: attempt %d: %w", r.method, r.path, attempt, err)
		} else if resp.Status < 200 || resp.Status > 299 {
			e := newError(r.method, r.path, resp.Meta, resp.Body, c.now())
			if !e.Retryable() {
				return resp, e
			}
			err, wait = e, e.RetryAfter
		} else {
			return resp, nil
		}
		if attempt >= r.retry.MaxAttempts {
			return resp, err
		}
		wait = max(wait, backoff(attempt, r.retry.BaseDelay, r.retry.MaxDelay, c.rand))
		if dl, ok := ctx.Deadline(); ok && c.now().Add(wait).After(dl) {
			return resp, c.stopped(r, context.DeadlineExceeded,
				fmt.Errorf("next attempt in %s is past the context deadline: %w", wait, err))
		}
		if serr := c.sleep(ctx, wait); serr != nil {
			return resp, c.stopped(r, serr, err)
		}
	}
}

// stopped is the error of a call cut off by its context: it wraps both the
// context's error and the last attempt's error.
func (c *Client) stopped(r *request, ctxErr, last error) error {
	return fmt.Errorf("oke client: %s %s: stopped: %w; last attempt: %w", r.method, r.path, ctxErr, last)
}

// attempt sends the request once and reads the whole answer. A non-nil
// error means no complete response arrived (the Response then carries only
// meta).
func (c *Client) attempt(ctx context.Context, r *request, meta Meta) (*Response, error) {
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body) // sets GetBody: redirects and the Transport can rewind it too
	}
	req, err := http.NewRequestWithContext(ctx, r.method, r.url, body)
	if err != nil {
		return &Response{Meta: meta}, err
	}
	req.Header = r.header.Clone()
	hr, err := c.http.Do(req)
	if err != nil {
		return &Response{Meta: meta}, err
	}
	defer hr.Body.Close()
	data, err := io.ReadAll(hr.Body)
	if err != nil {
		return &Response{Meta: meta}, fmt.Errorf("read response body: %w", err)
	}
	meta.Status = hr.StatusCode
	meta.Header = hr.Header
	meta.Location = hr.Header.Get("Location")
	meta.IdempotentReplayed = strings.EqualFold(hr.Header.Get(HeaderReplayed), "true")
	return &Response{Meta: meta, Body: data}, nil
}
