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
	// Waited is true when the server held the last attempt while an
	// earlier call with the same key ran: the attempt asked with Prefer:
	// wait=N (see [Retry].PreferWait) and the answer says
	// Preference-Applied: wait=N. With IdempotentReplayed it means the
	// answer is the first call's, delivered when that call finished rather
	// than after a Retry-After sleep.
	Waited bool
	// Pending is true when the answer parks the call's durable run: the
	// server answered 204 No Content naming the run (Oke-Run-Id) instead of
	// the run's final response, which is not there yet. [Invoke], [Call]
	// and the generated methods then return an error matching
	// [ErrPending]; [Wait] waits for the final answer instead.
	Pending bool
	// RunID is the durable run a parked answer names (Oke-Run-Id); "" for
	// any other answer.
	RunID string
	// Header holds all response headers of the last attempt.
	Header http.Header
}

// Response is a raw answer from [Client.Do]: Meta plus the body bytes.
type Response struct {
	Meta
	Body []byte

	raw *http.Response // Stream's 2xx answer, its body unread
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
	wait     time.Duration // Wait: how long to wait for the final answer
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
	flow   string // the operation's flow, for errors; "" for Call and Do
	method string
	path   string // expanded path, no query: for errors
	url    string
	header http.Header
	body   []byte
	retry  Retry
	stream bool          // Stream: a 2xx body is handed over unread
	wait   time.Duration // Wait: how long to wait for a parked run's final answer
}

// prefix is what the request's errors start with after "oke client: ".
func (r *request) prefix() string { return flowPrefix(r.flow) }

// prepare checks a call and builds what every attempt sends. Nothing is sent
// if it fails.
func (c *Client) prepare(op Operation, body []byte, opts []CallOption, stream bool) (*request, error) {
	method, path := op.Method, op.Path
	if method == "" || strings.ContainsAny(method, " \t\r\n/") {
		return nil, fmt.Errorf("oke client: %sinvalid method %q", flowPrefix(op.Flow), method)
	}
	var cc callConfig
	for _, o := range opts {
		o(&cc)
	}
	if err := errors.Join(cc.errs...); err != nil {
		return nil, err
	}
	if cc.conflict {
		return nil, fmt.Errorf("oke client: %sconflicting Key/NoKey options", flowPrefix(op.Flow))
	}
	expanded, err := expandPath(path, cc.params)
	if err != nil {
		if op.Flow != "" {
			err = fmt.Errorf("%s: %w", op.Flow, err)
		}
		return nil, err
	}
	hasBody := method != http.MethodGet && method != http.MethodHead
	if !hasBody && len(body) > 0 {
		return nil, fmt.Errorf("oke client: %s%s %s: a %s request has no body; pass parameters with client.Query", flowPrefix(op.Flow), method, expanded, method)
	}

	r := &request{flow: op.Flow, method: method, path: expanded, header: c.header.Clone(), retry: c.retry, stream: stream, wait: cc.wait}
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
		if op.Key == KeyIgnored {
			return nil, fmt.Errorf("oke client: %s %s: flow %s does not honor the Idempotency-Key header (a GET, a flow that only reads, a stream, a live feed or Idempotency: Off), so the server would ignore the key and it would protect nothing: drop client.Key", method, expanded, op.Flow)
		}
		if err := ValidateKey(cc.key); err != nil {
			return nil, err
		}
		key = cc.key
	case keyNone:
		if op.Key == KeyRequired {
			return nil, &keyError{reason: fmt.Sprintf("%s %s: flow %s requires an Idempotency-Key, so client.NoKey() is refused: drop it (a fresh key is sent) or pass the call's key with client.Key", method, expanded, op.Flow), missing: true}
		}
	case keyAuto:
		if op.Key == KeyRequired || op.Key == KeyAuto && hasBody {
			key = NewKey()
		}
	}
	if key != "" {
		r.header.Set(HeaderIdempotencyKey, key)
	} else if !idempotentMethod(method) && !op.ReadOnly {
		r.retry.MaxAttempts = 1 // no key: a second POST could run twice
	}
	if r.header.Get("Accept") == "" && !stream {
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

// expandPath fills {name} segments from params. A {name...} wildcard's
// value may hold slashes: each segment is escaped on its own. {$} (a
// ServeMux pattern's "end of path") is dropped.
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
		b.WriteString(rest[:i])
		rest = rest[i+j+1:]
		if name == "$" {
			continue
		}
		wild := strings.HasSuffix(name, "...")
		name = strings.TrimSuffix(name, "...")
		v, ok := params[name]
		if !ok {
			return "", fmt.Errorf("oke client: path %q: no PathParam for {%s}", path, name)
		}
		used[name] = true
		if !wild {
			b.WriteString(url.PathEscape(v))
			continue
		}
		for k, seg := range strings.Split(v, "/") {
			if k > 0 {
				b.WriteByte('/')
			}
			b.WriteString(url.PathEscape(seg))
		}
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
// On a 2xx answer the error is nil, a parked one (Meta.Pending: a durable
// run's 204 naming the run) included: Do hands over the answer as it came;
// with [Wait] it sends the call again until the final answer. On any other
// status Do returns both the
// Response and an *Error. On a network error, or when ctx ends, the Response
// has Status 0 and no body, but its Meta still tells the key sent and the
// attempts made. Do returns a nil Response only when nothing was sent: a bad
// path, option or key.
func (c *Client) Do(ctx context.Context, method, path string, body []byte, opts ...CallOption) (*Response, error) {
	r, err := c.prepare(Operation{Method: method, Path: path}, body, opts, false)
	if err != nil {
		return nil, err
	}
	return c.send(ctx, r)
}

// send runs the attempts of one prepared call.
//
// A retry of a 409 IdempotencyInProgress carries Prefer: wait=N (unless
// Retry.PreferWait turns it off, or too little time is left): a server
// that holds it answers once the first call with the key finishes (its
// stored answer) or N has passed. So after a 409 the next attempt is sent
// after the backoff only, not after Retry-After — unless that 409 answered
// an attempt that already asked to wait and the server did not hold it
// (no Preference-Applied): then the server does not hold requests, and its
// Retry-After is honoured.
func (c *Client) send(ctx context.Context, r *request) (*Response, error) {
	meta := Meta{IdempotencyKey: r.header.Get(HeaderIdempotencyKey)}
	if err := ctx.Err(); err != nil {
		return &Response{Meta: meta}, fmt.Errorf("oke client: %s%s %s: not sent: %w", r.prefix(), r.method, r.path, err)
	}
	prefer := 0 // the next attempt's Prefer: wait=N; 0 for none
	// A call that waits for its final answer (Wait) asks every attempt to
	// be held, until waitUntil, and sends a parked answer's call again.
	var waitUntil time.Time
	waits := r.wait > 0 && meta.IdempotencyKey != ""
	if waits {
		waitUntil = c.now().Add(r.wait)
		prefer = c.waitPrefer(ctx, waitUntil)
	}
	sent, again := 0, 0 // attempts sent; of them, those sent again while waiting
	for attempt := 1; ; attempt++ {
		sent++
		meta.Attempts = sent
		resp, err := c.attempt(ctx, r, meta, prefer)
		sentPrefer := prefer > 0
		prefer = 0
		var wait time.Duration
		inProgress := false
		if err != nil {
			if ctx.Err() != nil { // the context ended mid-request
				return resp, c.stopped(r, ctx.Err(), err)
			}
			err = fmt.Errorf("oke client: %s%s %s: attempt %d: %w", r.prefix(), r.method, r.path, attempt, err)
		} else if resp.Status < 200 || resp.Status > 299 {
			e := newError(r.method, r.path, resp.Meta, resp.Body, c.now())
			e.Flow = r.flow
			if !e.Retryable() {
				return resp, e
			}
			err, wait = e, e.RetryAfter
			inProgress = e.Code == CodeInProgress
		}
		if waits && (err == nil && resp.Pending || inProgress) {
			// Not the final answer yet: ask again, with the same key,
			// while the wait lasts. This is not a failed attempt.
			attempt--
			again++
			var pause time.Duration
			if !resp.Waited { // the server did not hold it: do not ask again at once
				pause = max(backoff(again, r.retry.BaseDelay, r.retry.MaxDelay, c.rand), wait)
			}
			if c.now().Add(pause).Before(waitUntil) {
				serr := ctx.Err()
				if pause > 0 {
					serr = c.sleep(ctx, pause)
				}
				if serr != nil {
					if err == nil {
						err = r.pendingError(resp.Meta)
					}
					return resp, c.stopped(r, serr, err)
				}
				if prefer = c.waitPrefer(ctx, waitUntil); prefer > 0 {
					continue
				}
			}
			if err == nil {
				return resp, nil // parked still: Invoke says ErrPending
			}
			return resp, err
		}
		if err == nil {
			return resp, nil
		}
		if attempt >= r.retry.MaxAttempts {
			return resp, err
		}
		backoffWait := backoff(attempt, r.retry.BaseDelay, r.retry.MaxDelay, c.rand)
		if inProgress {
			// Ask the server to hold the retry, unless it just showed it
			// does not (it ignored this attempt's Prefer).
			if n := c.preferWait(ctx, r.retry, backoffWait); n > 0 {
				prefer = n
				if !sentPrefer || resp.Meta.Waited {
					wait = 0 // no Retry-After sleep: the server holds the retry instead
				}
			}
		}
		wait = max(wait, backoffWait)
		if dl, ok := ctx.Deadline(); ok && c.now().Add(wait).After(dl) {
			return resp, c.stopped(r, context.DeadlineExceeded,
				fmt.Errorf("next attempt in %s is past the context deadline: %w", wait, err))
		}
		if serr := c.sleep(ctx, wait); serr != nil {
			return resp, c.stopped(r, serr, err)
		}
		if waits {
			prefer = c.waitPrefer(ctx, waitUntil)
		}
	}
}

// stopped is the error of a call cut off by its context: it wraps both the
// context's error and the last attempt's error.
func (c *Client) stopped(r *request, ctxErr, last error) error {
	return fmt.Errorf("oke client: %s%s %s: stopped: %w; last attempt: %w", r.prefix(), r.method, r.path, ctxErr, last)
}

// attempt sends the request once and reads the whole answer (for a stream's
// 2xx, only its head). prefer, when positive, is sent as Prefer: wait=N. A
// non-nil error means no complete response arrived (the Response then
// carries only meta).
func (c *Client) attempt(ctx context.Context, r *request, meta Meta, prefer int) (*Response, error) {
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body) // sets GetBody: redirects and the Transport can rewind it too
	}
	req, err := http.NewRequestWithContext(ctx, r.method, r.url, body)
	if err != nil {
		return &Response{Meta: meta}, err
	}
	req.Header = r.header.Clone()
	if prefer > 0 {
		req.Header.Set(HeaderPrefer, addWait(req.Header.Get(HeaderPrefer), prefer))
	}
	hr, err := c.http.Do(req)
	if err != nil {
		return &Response{Meta: meta}, err
	}
	sent := meta
	meta.Status = hr.StatusCode
	meta.Header = hr.Header
	meta.Location = hr.Header.Get("Location")
	meta.IdempotentReplayed = strings.EqualFold(hr.Header.Get(HeaderReplayed), "true")
	meta.Waited = prefer > 0 && waitApplied(hr.Header.Values(HeaderPreferenceApplied))
	meta.RunID, meta.Pending = pending(hr.Header, hr.StatusCode)
	if r.stream && hr.StatusCode >= 200 && hr.StatusCode <= 299 {
		return &Response{Meta: meta, raw: hr}, nil
	}
	defer hr.Body.Close()
	data, err := io.ReadAll(hr.Body)
	if err != nil {
		return &Response{Meta: sent}, fmt.Errorf("read response body: %w", err)
	}
	return &Response{Meta: meta, Body: data}, nil
}
