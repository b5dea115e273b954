package drivertest

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/okengine/oke"
	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/internal/idem"
)

// RunHTTP runs the Idempotency-Key rules of DESIGN.md section 3 end to end:
// an oke.App on the driver under test, driven over HTTP. Each subtest is
// named after the rule it proves.
func RunHTTP(t *testing.T, newDriver func(t *testing.T) driver.Driver) {
	t.Helper()
	runRules(t, newDriver, httpRules)
}

var httpRules = []rowRule{
	{"HonoredOnEveryMutatingMethodAndRPC", testHonoredMethods},
	{"IgnoredOnGET", testIgnoredOnGET},
	{"IgnoredForInProcessCall", testIgnoredForCall},
	{"IgnoredWhenEffectsAreOnlyReadsOrSecrets", testIgnoredReadOnly},
	{"HonoredForEveryNonReadEffect", testHonoredEveryEffect},
	{"IgnoredForStreamAndLive", testIgnoredStreamLive},
	{"IgnoredWhenOff", testIgnoredOff},
	{"OmittedIsAutoWithOptionalHeaderAnd24hTTL", testAutoDefault},
	{"RequiredWithoutHeaderIs400Missing", testRequiredMissing},
	{"TTLOptionSetsExpiryAndExpiredKeyRunsAgain", testTTLExpiry},
	{"KeyMustBe16To255PrintableASCII", testKeyValidation},
	{"ScopeIsTenantPrincipalAndFlow", testScope},
	{"FingerprintIgnoresKeyOrderAndWhitespace", testFingerprintCanonical},
	{"DifferentPayloadIs422Reused", testReused},
	{"GateFailureStoresNothing", testGateStoresNothing},
	{"ValidationFailureStoresNothing", testValidationStoresNothing},
	{"ReplayHasStoredStatusBodyTypeLocationAndReplayedHeader", testReplayShape},
	{"ReplayNeverCarriesCookiesOrOtherHeaders", testReplayNoCookies},
	{"StillRunningIs409WithRetryAfter", testInProgress},
	{"PreferWaitGetsTheFirstRequestsStoredAnswer", testPreferWait},
	{"NonJSONResponseIsNotStoredAndRowDeleted", testRawNotStored},
	{"FailureBeforeAnyEffectDeletesRow", testFailBefore},
	{"FailureAfterEachNonReadEffectStores500", testFailAfter},
	{"FailureAfterOnlySecretsDeletesRow", testFailAfterSecrets},
	{"DeclaredFailureIsStoredAsItself", testDeclaredFailure},
	{"DefaultLeaseIs30Seconds", testDefaultLease},
	{"LeaseIsRenewedWhileDoRuns", testLeaseRenewed},
	{"DisconnectDoesNotCancelClaimedDo", testDisconnect},
	{"NonDurableRunsAgainAfterLeaseLapses", testRunsAgainAfterLapse},
	{"StaleHolderCannotOverwriteNewOwnersResult", testStaleHolder},
	{"StaleHolderAnswersTheNewOwnersStoredResponse", testStaleHolderAfterNewOwner},
	{"StoreFailureFailsClosedWith503", testFailClosed},
	{"StoreFailureAfterTheFlowRanIs503OutcomeUnknown", testCompleteFails},
	{"StreamFlushesThroughTheApp", testStreamFlushes},
	{"TooLargeResponseStoresTombstone", testTooLarge},
	{"ExpiredRowsAreSweptAndReplacedOnClaim", testHTTPSweep},
	{"PeriodicSweepDeletesExpiredRows", testPeriodicSweep},
	{"ExpiryUnderLoadNeverReplaysExpiredNorDropsLive", testExpiryUnderLoad},
	{"HundredConcurrentRequestsRunDoOnce", testConcurrentOneKey},
	{"WebhookDedupesOnPayloadField", testWebhookDedupe},
}

// ---- harness ---------------------------------------------------------------

// faultDriver wraps a driver to inject store failures.
type faultDriver struct {
	driver.Driver
	failAll      atomic.Bool // every call fails with ErrUnavailable
	dropRenew    atomic.Bool // renewals fail, as if the holder lost the store
	failComplete atomic.Bool // completions fail with ErrUnavailable
}

func (f *faultDriver) Complete(ctx context.Context, k driver.Key, owner string, resp driver.Response, ttl time.Duration) error {
	if f.failAll.Load() || f.failComplete.Load() {
		return errInjected
	}
	return f.Driver.Complete(ctx, k, owner, resp, ttl)
}

var errInjected = fmt.Errorf("drivertest: injected fault: %w", driver.ErrUnavailable)

func (f *faultDriver) Claim(ctx context.Context, r driver.ClaimRequest) (driver.ClaimResult, error) {
	if f.failAll.Load() {
		return driver.ClaimResult{}, errInjected
	}
	return f.Driver.Claim(ctx, r)
}

func (f *faultDriver) Renew(ctx context.Context, k driver.Key, owner string, lease time.Duration) error {
	if f.failAll.Load() || f.dropRenew.Load() {
		return errInjected
	}
	return f.Driver.Renew(ctx, k, owner, lease)
}

type harness struct {
	t     *testing.T
	db    *sql.DB // a fake database for fx.Store writes, closed with the test
	d     driver.Driver
	fault *faultDriver
	app   *oke.App
	runs  sync.Map // flow name → *atomic.Int64
}

// newHarness builds an app on d with cfg; bind adds the flows.
func newHarness(t *testing.T, d driver.Driver, cfg oke.Config, bind func(h *harness, app *oke.App)) *harness {
	t.Helper()
	h := &harness{t: t, d: d, db: fakeDB(), fault: &faultDriver{Driver: d}}
	t.Cleanup(func() { h.db.Close() })
	cfg.Driver = h.fault
	if cfg.SweepInterval == 0 {
		cfg.SweepInterval = -1
	}
	if cfg.Gate == nil {
		cfg.Gate = testGate
	}
	h.app = oke.New(cfg)
	bind(h, h.app)
	if err := h.app.Start(context.Background()); err != nil {
		t.Fatalf("start app: %v", err)
	}
	t.Cleanup(func() { h.app.Close(context.Background()) })
	return h
}

// testGate: "Authorization: Bearer user:<id>" → user:<id>; "Bearer bad" →
// 401; "X-Forbid: 1" → 403; X-Tenant sets the tenant.
func testGate(r *http.Request, _ string) (oke.Identity, error) {
	id := oke.Identity{Tenant: r.Header.Get("X-Tenant")}
	if r.Header.Get("X-Forbid") != "" {
		return id, oke.Forbidden("not for you")
	}
	if a := r.Header.Get("Authorization"); a != "" {
		p, ok := strings.CutPrefix(a, "Bearer user:")
		if !ok {
			return id, oke.Unauthorized("bad token")
		}
		id.Principal = "user:" + p
	}
	return id, nil
}

func (h *harness) counter(flow string) *atomic.Int64 {
	c, _ := h.runs.LoadOrStore(flow, new(atomic.Int64))
	return c.(*atomic.Int64)
}

// ran returns how many times flow's function started.
func (h *harness) ran(flow string) int64 { return h.counter(flow).Load() }

// req sends a request through the app. hdr is name, value pairs.
func (h *harness) req(method, path, body string, hdr ...string) *httptest.ResponseRecorder {
	h.t.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Add(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.app.ServeHTTP(w, r)
	return w
}

type chargeIn struct {
	Amount   int    `json:"amount"`
	Currency string `json:"currency"`
}

func (c chargeIn) Validate() error {
	if c.Amount <= 0 {
		return errors.New("amount must be greater than 0")
	}
	return nil
}

type chargeOut struct {
	N        int64  `json:"n"`
	Amount   int    `json:"amount"`
	Currency string `json:"currency"`
}

// chargeFlow counts its runs, writes through the store and answers 201 with
// a Location and a cookie (which must never be replayed).
func (h *harness) chargeFlow(name string, opts oke.Options) *oke.Flow[chargeIn, chargeOut] {
	db := h.db
	return oke.NewFlow(name, opts, func(ctx context.Context, in chargeIn, fx *oke.Fx) (oke.Response[chargeOut], error) {
		n := h.counter(name).Add(1)
		if _, err := fx.Store(db).Exec(ctx, "INSERT INTO charges (amount) VALUES (?)", in.Amount); err != nil {
			return oke.Response[chargeOut]{}, err
		}
		resp := oke.Created(chargeOut{N: n, Amount: in.Amount, Currency: in.Currency}, "/charges/"+strconv.FormatInt(n, 10))
		resp.Header = http.Header{"Set-Cookie": {"session=secret"}, "X-Live-Only": {"1"}}
		return resp, nil
	})
}

const (
	key1 = "key-0123456789abcdef"
	key2 = "key-fedcba9876543210"
	body = `{"amount":100,"currency":"usd"}`
)

func wantStatus(t *testing.T, what string, w *httptest.ResponseRecorder, status int) {
	t.Helper()
	if w.Code != status {
		t.Fatalf("%s: status %d, want %d; body %s", what, w.Code, status, w.Body)
	}
}

func wantCode(t *testing.T, what string, w *httptest.ResponseRecorder, status int, code string) {
	t.Helper()
	wantStatus(t, what, w, status)
	if !strings.Contains(w.Body.String(), `"code":"`+code+`"`) {
		t.Fatalf("%s: body %s, want error code %s", what, w.Body, code)
	}
}

func wantRuns(t *testing.T, h *harness, flow string, n int64) {
	t.Helper()
	if got := h.ran(flow); got != n {
		t.Fatalf("flow %s ran %d times, want %d", flow, got, n)
	}
}

func replayed(w *httptest.ResponseRecorder) bool {
	return w.Header().Get("Idempotent-Replayed") == "true"
}

// waitFor receives from ch, failing the test rather than hanging if nothing
// comes within a minute.
func waitFor[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(time.Minute):
		t.Fatalf("timed out waiting for %s", what)
	}
	var zero T
	return zero
}

// ---- when the header is honored -------------------------------------------

func testHonoredMethods(t *testing.T, d driver.Driver) {
	var fl *oke.Flow[chargeIn, chargeOut]
	h := newHarness(t, d, oke.Config{}, func(h *harness, app *oke.App) {
		fl = h.chargeFlow("t.charge", oke.Options{})
		for _, b := range []oke.Binding{oke.POST("/c"), oke.PUT("/c"), oke.PATCH("/c"), oke.DELETE("/c"), oke.QUERY("/c"), oke.RPC()} {
			app.Handle(b, fl)
		}
	})
	for i, m := range []struct{ method, path string }{
		{"POST", "/c"}, {"PUT", "/c"}, {"PATCH", "/c"}, {"DELETE", "/c"}, {"QUERY", "/c"}, {"POST", "/rpc/t.charge"},
	} {
		key := fmt.Sprintf("method-key-%08d", i)
		first := h.req(m.method, m.path, body, "Idempotency-Key", key)
		wantStatus(t, m.method+" "+m.path+" first", first, 201)
		second := h.req(m.method, m.path, body, "Idempotency-Key", key)
		wantStatus(t, m.method+" "+m.path+" retry", second, 201)
		if !replayed(second) || second.Body.String() != first.Body.String() {
			t.Fatalf("%s %s: retry not replayed: %s vs %s", m.method, m.path, second.Body, first.Body)
		}
	}
	wantRuns(t, h, "t.charge", 6)
}

func testIgnoredOnGET(t *testing.T, d driver.Driver) {
	h := newHarness(t, d, oke.Config{}, func(h *harness, app *oke.App) {
		app.Handle(oke.GET("/c"), h.chargeFlow("t.get", oke.Options{}))
	})
	for i := 0; i < 2; i++ {
		w := h.req("GET", "/c?amount=5", "", "Idempotency-Key", key1)
		wantStatus(t, "GET", w, 201)
		if replayed(w) {
			t.Fatal("GET was replayed")
		}
	}
	wantRuns(t, h, "t.get", 2)
}

func testIgnoredForCall(t *testing.T, d driver.Driver) {
	h := newHarness(t, d, oke.Config{}, func(h *harness, app *oke.App) {
		inner := h.chargeFlow("t.inner", oke.Options{Idempotency: oke.Required})
		outer := oke.NewFlow("t.outer", oke.Options{}, func(ctx context.Context, in chargeIn, fx *oke.Fx) (oke.Response[int64], error) {
			h.counter("t.outer").Add(1)
			a, err := oke.Call(ctx, fx, inner, in)
			if err != nil {
				return oke.Response[int64]{}, err
			}
			b, err := oke.Call(ctx, fx, inner, in)
			if err != nil {
				return oke.Response[int64]{}, err
			}
			return oke.OK(a.N + b.N), nil
		})
		app.Handle(oke.POST("/outer"), outer)
		app.Handle(oke.POST("/inner"), inner)
	})
	w := h.req("POST", "/outer", body, "Idempotency-Key", key1)
	wantStatus(t, "outer", w, 200)
	// The inner flow is Required over HTTP, yet an in-process call has no
	// request and no key: it runs each time it is called.
	wantRuns(t, h, "t.inner", 2)
	w = h.req("POST", "/outer", body, "Idempotency-Key", key1)
	if !replayed(w) {
		t.Fatal("outer retry not replayed")
	}
	wantRuns(t, h, "t.inner", 2)
	wantRuns(t, h, "t.outer", 1)
}

func testIgnoredReadOnly(t *testing.T, d driver.Driver) {
	h := newHarness(t, d, oke.Config{}, func(h *harness, app *oke.App) {
		for _, c := range []struct {
			name    string
			effects []oke.Effect
		}{{"t.reads", []oke.Effect{oke.EffectRead}}, {"t.secrets", []oke.Effect{oke.EffectSecrets}}, {"t.both", []oke.Effect{oke.EffectRead, oke.EffectSecrets}}} {
			name := c.name
			app.Handle(oke.POST("/"+name), oke.NewFlow(name, oke.Options{Effects: c.effects},
				func(ctx context.Context, in chargeIn, fx *oke.Fx) (oke.Response[int64], error) {
					return oke.OK(h.counter(name).Add(1)), nil
				}))
		}
	})
	for _, name := range []string{"t.reads", "t.secrets", "t.both"} {
		for i := 0; i < 2; i++ {
			w := h.req("POST", "/"+name, body, "Idempotency-Key", key1)
			wantStatus(t, name, w, 200)
			if replayed(w) {
				t.Fatalf("%s: replayed, but a read-only flow ignores the header", name)
			}
		}
		wantRuns(t, h, name, 2)
	}
}

// fakeProviders records sends, asks and embeds.
type fakeProviders struct{}

func (fakeProviders) Secret(context.Context, string) (string, error) { return "s", nil }
func (fakeProviders) Send(context.Context, oke.Message) error        { return nil }
func (fakeProviders) Ask(context.Context, oke.AskRequest) (oke.AskResponse, error) {
	return oke.AskResponse{Text: "ok"}, nil
}
func (fakeProviders) Embed(_ context.Context, texts []string) ([][]float32, error) {
	return make([][]float32, len(texts)), nil
}

// effectActions performs each non-read effect through Fx.
func effectActions(target string) map[oke.Effect]func(ctx context.Context, fx *oke.Fx, h *harness) error {
	return map[oke.Effect]func(ctx context.Context, fx *oke.Fx, h *harness) error{
		oke.EffectWrite: func(ctx context.Context, fx *oke.Fx, h *harness) error {
			_, err := fx.Store(h.db).QueryRow(ctx, "INSERT INTO t (x) VALUES (1) RETURNING id"), error(nil)
			return err
		},
		oke.EffectEmit: func(ctx context.Context, fx *oke.Fx, _ *harness) error { return fx.Emit(ctx, "t.happened", 1) },
		oke.EffectSend: func(ctx context.Context, fx *oke.Fx, _ *harness) error {
			return fx.Send(ctx, oke.Message{Channel: "email", To: "a@example.com"})
		},
		oke.EffectCall: func(ctx context.Context, fx *oke.Fx, h *harness) error {
			_, err := oke.Call(ctx, fx, oke.NewFlow("t.noop", oke.Options{}, func(context.Context, struct{}, *oke.Fx) (oke.Response[int], error) {
				return oke.OK(1), nil
			}), struct{}{})
			return err
		},
		oke.EffectFetch: func(ctx context.Context, fx *oke.Fx, _ *harness) error {
			req, _ := http.NewRequestWithContext(ctx, "POST", target, nil)
			resp, err := fx.Fetch(req)
			if err == nil {
				resp.Body.Close()
			}
			return err
		},
		oke.EffectAsk: func(ctx context.Context, fx *oke.Fx, _ *harness) error {
			_, err := fx.Ask(ctx, oke.AskRequest{Prompt: "hi"})
			return err
		},
		oke.EffectEmbed: func(ctx context.Context, fx *oke.Fx, _ *harness) error {
			_, err := fx.Embed(ctx, []string{"hi"})
			return err
		},
		oke.EffectRaw: func(ctx context.Context, fx *oke.Fx, _ *harness) error {
			return fx.Raw(ctx, "publish", func(context.Context) error { return nil })
		},
	}
}

func providerConfig(t *testing.T) (oke.Config, string) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(srv.Close)
	p := fakeProviders{}
	return oke.Config{Sender: p, LanguageModel: p, Embedder: p}, srv.URL
}

func testHonoredEveryEffect(t *testing.T, d driver.Driver) {
	cfg, target := providerConfig(t)
	actions := effectActions(target)
	h := newHarness(t, d, cfg, func(h *harness, app *oke.App) {
		for e, act := range actions {
			name, act := "t."+string(e), act
			app.Handle(oke.POST("/"+name), oke.NewFlow(name, oke.Options{Effects: []oke.Effect{e}},
				func(ctx context.Context, in chargeIn, fx *oke.Fx) (oke.Response[int64], error) {
					n := h.counter(name).Add(1)
					return oke.OK(n), act(ctx, fx, h)
				}))
		}
	})
	for e := range actions {
		name := "t." + string(e)
		h.req("POST", "/"+name, body, "Idempotency-Key", key1)
		w := h.req("POST", "/"+name, body, "Idempotency-Key", key1)
		wantStatus(t, name, w, 200)
		if !replayed(w) {
			t.Fatalf("effect %s: a flow declaring it must honor the header", e)
		}
		wantRuns(t, h, name, 1)
	}
}

func testIgnoredStreamLive(t *testing.T, d driver.Driver) {
	h := newHarness(t, d, oke.Config{}, func(h *harness, app *oke.App) {
		app.Handle(oke.POST("/export"), oke.NewStream("t.export", oke.Options{},
			func(ctx context.Context, in struct{}, fx *oke.Fx, w http.ResponseWriter) error {
				n := h.counter("t.export").Add(1)
				fmt.Fprintf(w, "line %d\n", n)
				return nil
			}))
		app.Handle(oke.GET("/live"), oke.NewLive("t.live", oke.Options{},
			func(ctx context.Context, in struct{}, fx *oke.Fx, send func(oke.Event) error) error {
				h.counter("t.live").Add(1)
				return send(oke.Event{Name: "hello", Data: []byte(`1`)})
			}))
	})
	for i := 1; i <= 2; i++ {
		w := h.req("POST", "/export", "", "Idempotency-Key", key1)
		if w.Code != 200 || replayed(w) || w.Body.String() != fmt.Sprintf("line %d\n", i) {
			t.Fatalf("stream call %d: %d %q replayed=%v", i, w.Code, w.Body, replayed(w))
		}
		w = h.req("GET", "/live", "", "Idempotency-Key", key1)
		if w.Code != 200 || !strings.Contains(w.Body.String(), "event: hello") || replayed(w) {
			t.Fatalf("live call %d: %d %q", i, w.Code, w.Body)
		}
	}
	wantRuns(t, h, "t.export", 2)
	wantRuns(t, h, "t.live", 2)
	if rows, _ := h.d.List(context.Background(), driver.Key{}, 10); len(rows) != 0 {
		t.Fatalf("stream and live stored %d rows", len(rows))
	}
}

func testIgnoredOff(t *testing.T, d driver.Driver) {
	h := newHarness(t, d, oke.Config{}, func(h *harness, app *oke.App) {
		app.Handle(oke.POST("/c"), h.chargeFlow("t.off", oke.Options{Idempotency: oke.Off}))
	})
	for i := 0; i < 2; i++ {
		if w := h.req("POST", "/c", body, "Idempotency-Key", "bad"); w.Code != 201 || replayed(w) {
			t.Fatalf("off flow: %d replayed=%v (an invalid key is ignored too)", w.Code, replayed(w))
		}
	}
	wantRuns(t, h, "t.off", 2)
}

// ---- options ----------------------------------------------------------------

func testAutoDefault(t *testing.T, d driver.Driver) {
	h := newHarness(t, d, oke.Config{}, func(h *harness, app *oke.App) {
		app.Handle(oke.POST("/c"), h.chargeFlow("t.auto", oke.Options{}))
	})
	h.req("POST", "/c", body)
	h.req("POST", "/c", body)
	wantRuns(t, h, "t.auto", 2) // header optional: no key, no protection
	before := time.Now()
	h.req("POST", "/c", body, "Idempotency-Key", key1)
	row, err := h.d.Get(context.Background(), driver.Key{Tenant: "default", Principal: "anon", Flow: "t.auto", Key: key1})
	if err != nil {
		t.Fatalf("row not stored: %v", err)
	}
	if exp := row.ExpiresAt.Sub(before); exp < 24*time.Hour-skew || exp > 24*time.Hour+skew {
		t.Fatalf("default TTL: row expires in %v, want 24h", exp)
	}
}

func testRequiredMissing(t *testing.T, d driver.Driver) {
	h := newHarness(t, d, oke.Config{}, func(h *harness, app *oke.App) {
		app.Handle(oke.POST("/c"), h.chargeFlow("t.req", oke.Options{Idempotency: oke.Required}))
	})
	w := h.req("POST", "/c", body)
	wantCode(t, "no header", w, 400, "IdempotencyKeyMissing")
	if !strings.Contains(w.Body.String(), oke.ErrIdempotencyKeyMissing.Message) {
		t.Fatalf("message: %s", w.Body)
	}
	wantRuns(t, h, "t.req", 0)
	wantStatus(t, "with header", h.req("POST", "/c", body, "Idempotency-Key", key1), 201)
}

func testTTLExpiry(t *testing.T, d driver.Driver) {
	h := newHarness(t, d, oke.Config{}, func(h *harness, app *oke.App) {
		app.Handle(oke.POST("/hour"), h.chargeFlow("t.hour", oke.Options{Idempotency: oke.Idempotency{Mode: oke.ModeRequired, TTL: "1h"}}))
		app.Handle(oke.POST("/short"), h.chargeFlow("t.short", oke.Options{Idempotency: oke.Idempotency{TTL: "20ms"}}))
	})
	before := time.Now()
	h.req("POST", "/hour", body, "Idempotency-Key", key1)
	row, err := h.d.Get(context.Background(), driver.Key{Tenant: "default", Principal: "anon", Flow: "t.hour", Key: key1})
	if err != nil {
		t.Fatal(err)
	}
	if exp := row.ExpiresAt.Sub(before); exp < time.Hour-skew || exp > time.Hour+skew {
		t.Fatalf("TTL 1h: row expires in %v", exp)
	}
	first := h.req("POST", "/short", body, "Idempotency-Key", key1)
	time.Sleep(after)
	second := h.req("POST", "/short", body, "Idempotency-Key", key1)
	if replayed(second) || second.Body.String() == first.Body.String() {
		t.Fatalf("after the TTL the key must run again; got replay %s", second.Body)
	}
	wantRuns(t, h, "t.short", 2)
}

// ---- key ------------------------------------------------------------------

func testKeyValidation(t *testing.T, d driver.Driver) {
	h := newHarness(t, d, oke.Config{}, func(h *harness, app *oke.App) {
		app.Handle(oke.POST("/c"), h.chargeFlow("t.key", oke.Options{}))
	})
	for _, c := range []struct {
		name string
		key  string
		ok   bool
	}{
		{"15 chars", strings.Repeat("k", 15), false},
		{"16 chars", strings.Repeat("k", 16), true},
		{"255 chars", strings.Repeat("k", 255), true},
		{"256 chars", strings.Repeat("k", 256), false},
		{"empty", "", false},
		{"space and tilde are printable", " ~" + strings.Repeat("k", 14), true},
		{"tab", "\t" + strings.Repeat("k", 15), false},
		{"DEL 0x7F", "\x7f" + strings.Repeat("k", 15), false},
		{"non-ASCII", "é" + strings.Repeat("k", 15), false},
	} {
		w := h.req("POST", "/c", body, "Idempotency-Key", c.key)
		if c.ok {
			wantStatus(t, c.name, w, 201)
			continue
		}
		wantCode(t, c.name, w, 400, "IdempotencyKeyInvalid")
		if !strings.Contains(w.Body.String(), oke.ErrIdempotencyKeyInvalid.Message) {
			t.Fatalf("%s: message %s", c.name, w.Body)
		}
	}
	wantRuns(t, h, "t.key", 3)
	rows, _ := h.d.List(context.Background(), driver.Key{}, 100)
	if len(rows) != 3 {
		t.Fatalf("invalid keys must store nothing: %d rows", len(rows))
	}
}

// ---- scope and fingerprint -------------------------------------------------

func testScope(t *testing.T, d driver.Driver) {
	h := newHarness(t, d, oke.Config{}, func(h *harness, app *oke.App) {
		app.Handle(oke.POST("/a"), h.chargeFlow("t.scopeA", oke.Options{}))
		app.Handle(oke.POST("/b"), h.chargeFlow("t.scopeB", oke.Options{}))
	})
	calls := []struct{ path, auth, tenant string }{
		{"/a", "", ""}, {"/a", "Bearer user:1", ""}, {"/a", "Bearer user:2", ""},
		{"/a", "Bearer user:1", "acme"}, {"/b", "Bearer user:1", ""},
	}
	for _, c := range calls {
		hdr := []string{"Idempotency-Key", key1}
		if c.auth != "" {
			hdr = append(hdr, "Authorization", c.auth)
		}
		if c.tenant != "" {
			hdr = append(hdr, "X-Tenant", c.tenant)
		}
		if w := h.req("POST", c.path, body, hdr...); replayed(w) {
			t.Fatalf("%+v: replayed another scope's response", c)
		}
	}
	wantRuns(t, h, "t.scopeA", 4)
	wantRuns(t, h, "t.scopeB", 1)
	// Each scope replays its own.
	if w := h.req("POST", "/a", body, "Idempotency-Key", key1, "Authorization", "Bearer user:2"); !replayed(w) {
		t.Fatal("same scope did not replay")
	}
}

func testFingerprintCanonical(t *testing.T, d driver.Driver) {
	h := newHarness(t, d, oke.Config{}, func(h *harness, app *oke.App) {
		app.Handle(oke.POST("/c"), h.chargeFlow("t.fp", oke.Options{}))
	})
	h.req("POST", "/c", `{"amount":100,"currency":"usd"}`, "Idempotency-Key", key1)
	w := h.req("POST", "/c", "\n{ \"currency\" : \"usd\",\n  \"amount\": 100 }  ", "Idempotency-Key", key1)
	if !replayed(w) {
		t.Fatalf("reordered, re-spaced body was not replayed: %d %s", w.Code, w.Body)
	}
	wantRuns(t, h, "t.fp", 1)
}

func testReused(t *testing.T, d driver.Driver) {
	h := newHarness(t, d, oke.Config{}, func(h *harness, app *oke.App) {
		app.Handle(oke.POST("/c"), h.chargeFlow("t.reuse", oke.Options{}))
	})
	h.req("POST", "/c", body, "Idempotency-Key", key1)
	w := h.req("POST", "/c", `{"amount":101,"currency":"usd"}`, "Idempotency-Key", key1)
	wantCode(t, "different payload", w, 422, "IdempotencyKeyReused")
	if !strings.Contains(w.Body.String(), oke.ErrIdempotencyKeyReused.Message) {
		t.Fatalf("message: %s", w.Body)
	}
	wantRuns(t, h, "t.reuse", 1)
}

// ---- order --------------------------------------------------------------------

func testGateStoresNothing(t *testing.T, d driver.Driver) {
	h := newHarness(t, d, oke.Config{}, func(h *harness, app *oke.App) {
		app.Handle(oke.POST("/c"), h.chargeFlow("t.gate", oke.Options{Idempotency: oke.Required}))
	})
	wantCode(t, "401", h.req("POST", "/c", body, "Idempotency-Key", key1, "Authorization", "Bearer bad"), 401, "Unauthorized")
	wantCode(t, "403", h.req("POST", "/c", body, "Idempotency-Key", key1, "X-Forbid", "1"), 403, "Forbidden")
	// The gate runs before key checks: a bad key is still a 401.
	wantCode(t, "401 before key check", h.req("POST", "/c", body, "Authorization", "Bearer bad"), 401, "Unauthorized")
	wantRuns(t, h, "t.gate", 0)
	w := h.req("POST", "/c", body, "Idempotency-Key", key1)
	wantStatus(t, "same key after 401/403", w, 201)
	if replayed(w) {
		t.Fatal("401/403 left a row behind")
	}
}

func testValidationStoresNothing(t *testing.T, d driver.Driver) {
	h := newHarness(t, d, oke.Config{}, func(h *harness, app *oke.App) {
		app.Handle(oke.POST("/c"), h.chargeFlow("t.valid", oke.Options{Idempotency: oke.Required}))
	})
	for _, c := range []struct{ name, body, code string }{
		{"validation", `{"amount":0,"currency":"usd"}`, "ValidationFailed"},
		{"malformed", `{"amount":`, "MalformedJSON"},
		{"unknown field", `{"amount":1,"cur":"usd"}`, "UnknownField"},
		{"wrong type", `{"amount":"1"}`, "InvalidInput"},
		{"two values", `{"amount":1}{"amount":2}`, "MalformedJSON"},
	} {
		wantCode(t, c.name, h.req("POST", "/c", c.body, "Idempotency-Key", key1), 400, c.code)
	}
	wantRuns(t, h, "t.valid", 0)
	// The same key then succeeds with a valid body: nothing was stored.
	w := h.req("POST", "/c", body, "Idempotency-Key", key1)
	wantStatus(t, "valid after invalid", w, 201)
	if replayed(w) {
		t.Fatal("a validation failure left a row")
	}
}

// ---- what a request sees ---------------------------------------------------------

func testReplayShape(t *testing.T, d driver.Driver) {
	h := newHarness(t, d, oke.Config{}, func(h *harness, app *oke.App) {
		app.Handle(oke.POST("/c"), h.chargeFlow("t.shape", oke.Options{}))
	})
	first := h.req("POST", "/c", body, "Idempotency-Key", key1)
	second := h.req("POST", "/c", body, "Idempotency-Key", key1)
	if replayed(first) {
		t.Fatal("the live response says it was replayed")
	}
	if second.Code != first.Code || second.Body.String() != first.Body.String() ||
		second.Header().Get("Content-Type") != first.Header().Get("Content-Type") ||
		second.Header().Get("Location") != first.Header().Get("Location") || !replayed(second) {
		t.Fatalf("replay %d %v %q differs from live %d %v %q", second.Code, second.Header(), second.Body, first.Code, first.Header(), first.Body)
	}
	if first.Header().Get("Location") != "/charges/1" {
		t.Fatalf("Location %q", first.Header().Get("Location"))
	}
}

func testReplayNoCookies(t *testing.T, d driver.Driver) {
	h := newHarness(t, d, oke.Config{}, func(h *harness, app *oke.App) {
		app.Handle(oke.POST("/c"), h.chargeFlow("t.cookie", oke.Options{}))
	})
	first := h.req("POST", "/c", body, "Idempotency-Key", key1)
	if first.Header().Get("Set-Cookie") == "" {
		t.Fatal("the live response lost its Set-Cookie")
	}
	second := h.req("POST", "/c", body, "Idempotency-Key", key1)
	for _, name := range []string{"Set-Cookie", "X-Live-Only", "Authorization"} {
		if v := second.Header().Get(name); v != "" {
			t.Fatalf("replay carries %s: %q", name, v)
		}
	}
}

func testInProgress(t *testing.T, d driver.Driver) {
	release := make(chan struct{})
	started := make(chan struct{})
	h := newHarness(t, d, oke.Config{Lease: hold}, func(h *harness, app *oke.App) {
		app.Handle(oke.POST("/slow"), oke.NewFlow("t.slow", oke.Options{},
			func(ctx context.Context, in chargeIn, fx *oke.Fx) (oke.Response[int64], error) {
				n := h.counter("t.slow").Add(1)
				close(started)
				<-release
				return oke.Created(n, ""), nil
			}))
	})
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- h.req("POST", "/slow", body, "Idempotency-Key", key1) }()
	waitFor(t, "the flow to start", started)
	w := h.req("POST", "/slow", body, "Idempotency-Key", key1)
	wantCode(t, "while running", w, 409, "IdempotencyInProgress")
	if !strings.Contains(w.Body.String(), oke.ErrIdempotencyInProgress.Message) {
		t.Fatalf("message: %s", w.Body)
	}
	ra, err := strconv.Atoi(w.Header().Get("Retry-After"))
	if err != nil || ra < 1 || ra > int(hold/time.Second) {
		t.Fatalf("Retry-After %q: want whole seconds in [1, %d]", w.Header().Get("Retry-After"), int(hold/time.Second))
	}
	close(release)
	if first := <-done; first.Code != 201 {
		t.Fatalf("first: %d", first.Code)
	}
	if w := h.req("POST", "/slow", body, "Idempotency-Key", key1); !replayed(w) {
		t.Fatal("after completion the key must replay")
	}
	wantRuns(t, h, "t.slow", 1)
	if got := idem.RetryAfter(300 * time.Millisecond); got != time.Second {
		t.Fatalf("Retry-After of a lease about to end: %v, want at least 1s", got)
	}
}

// testPreferWait: a request that sends "Prefer: wait=N" while its key's
// first request runs is held until that request finishes, and gets its
// stored answer (Idempotent-Replayed, Preference-Applied: wait=N) instead of
// 409; the flow runs once. Without the header the answer is still 409, and
// a wait that ends first answers 409 too.
func testPreferWait(t *testing.T, d driver.Driver) {
	release := make(chan struct{})
	started := make(chan struct{})
	h := newHarness(t, d, oke.Config{Lease: hold}, func(h *harness, app *oke.App) {
		app.Handle(oke.POST("/slow"), oke.NewFlow("t.wait", oke.Options{},
			func(ctx context.Context, in chargeIn, fx *oke.Fx) (oke.Response[int64], error) {
				n := h.counter("t.wait").Add(1)
				fx.Raw(ctx, "write", func(context.Context) error { return nil })
				if n == 1 {
					close(started)
					<-release
				}
				return oke.Created(n, "/slow/1"), nil
			}))
	})
	first := make(chan *httptest.ResponseRecorder)
	go func() { first <- h.req("POST", "/slow", body, "Idempotency-Key", key1) }()
	waitFor(t, "the flow to start", started)
	wantCode(t, "without Prefer: wait", h.req("POST", "/slow", body, "Idempotency-Key", key1), 409, "IdempotencyInProgress")
	short := h.req("POST", "/slow", body, "Idempotency-Key", key1, "Prefer", "wait=1")
	wantCode(t, "a wait that ends before the first request", short, 409, "IdempotencyInProgress")
	if short.Header().Get("Preference-Applied") != "wait=1" || short.Header().Get("Retry-After") == "" {
		t.Fatalf("an expired wait: headers %v", short.Header())
	}
	held := make(chan *httptest.ResponseRecorder)
	go func() {
		held <- h.req("POST", "/slow", body, "Idempotency-Key", key1, "Prefer", "respond-async, wait=100")
	}()
	// Release the first request only once the second is being held.
	eventually(t, "the second request to be held", func() bool { return waiting(t, h.app, "t.wait") == 1 })
	close(release)
	w := waitFor(t, "the held request", held)
	f := waitFor(t, "the first request", first)
	if f.Code != 201 || replayed(f) {
		t.Fatalf("first: %d replayed=%v", f.Code, replayed(f))
	}
	if w.Code != 201 || !replayed(w) || w.Body.String() != f.Body.String() || w.Header().Get("Location") != "/slow/1" {
		t.Fatalf("the held request: %d replayed=%v %s, want the first's stored answer %s", w.Code, replayed(w), w.Body, f.Body)
	}
	if got := w.Header().Get("Preference-Applied"); got != "wait=60" {
		t.Fatalf("Preference-Applied %q, want wait=60 (a wait above 60 s is 60)", got)
	}
	wantRuns(t, h, "t.wait", 1)
}

// waiting is the app's oke_idempotency_waiting gauge of flow.
func waiting(t *testing.T, app *oke.App, flow string) float64 {
	t.Helper()
	mfs, err := app.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "oke_idempotency_waiting" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "flow" && l.GetValue() == flow {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return 0
}

func testRawNotStored(t *testing.T, d driver.Driver) {
	h := newHarness(t, d, oke.Config{}, func(h *harness, app *oke.App) {
		app.Handle(oke.POST("/csv"), oke.NewFlow("t.csv", oke.Options{},
			func(ctx context.Context, in struct{}, fx *oke.Fx) (oke.Response[struct{}], error) {
				n := h.counter("t.csv").Add(1)
				fx.Raw(ctx, "touch", func(context.Context) error { return nil })
				return oke.RawResponse[struct{}](200, "text/csv", []byte(fmt.Sprintf("n\n%d\n", n))), nil
			}))
		app.Handle(oke.POST("/json"), oke.NewFlow("t.rawjson", oke.Options{},
			func(ctx context.Context, in struct{}, fx *oke.Fx) (oke.Response[struct{}], error) {
				h.counter("t.rawjson").Add(1)
				return oke.RawResponse[struct{}](200, "application/problem+json", []byte(`{"ok":true}`)), nil
			}))
	})
	for i := 1; i <= 2; i++ {
		w := h.req("POST", "/csv", "", "Idempotency-Key", key1)
		if w.Code != 200 || replayed(w) || w.Body.String() != fmt.Sprintf("n\n%d\n", i) {
			t.Fatalf("csv call %d: %d %q", i, w.Code, w.Body)
		}
	}
	if _, err := h.d.Get(context.Background(), driver.Key{Tenant: "default", Principal: "anon", Flow: "t.csv", Key: key1}); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("row of a non-JSON response not deleted: %v", err)
	}
	h.req("POST", "/json", "", "Idempotency-Key", key1)
	if w := h.req("POST", "/json", "", "Idempotency-Key", key1); !replayed(w) || w.Header().Get("Content-Type") != "application/problem+json" {
		t.Fatalf("a raw JSON envelope is stored: %d %v", w.Code, w.Header())
	}
}

// ---- failures -------------------------------------------------------------------

func testFailBefore(t *testing.T, d driver.Driver) {
	h := newHarness(t, d, oke.Config{Logger: quietLogger()}, func(h *harness, app *oke.App) {
		app.Handle(oke.POST("/f"), oke.NewFlow("t.failbefore", oke.Options{},
			func(ctx context.Context, in chargeIn, fx *oke.Fx) (oke.Response[int64], error) {
				n := h.counter("t.failbefore").Add(1)
				fx.Store(h.db).QueryRow(ctx, "SELECT 1") // a read does not count
				if n == 1 {
					return oke.Response[int64]{}, errors.New("boom")
				}
				return oke.Created(n, ""), nil
			}))
	})
	wantCode(t, "first", h.req("POST", "/f", body, "Idempotency-Key", key1), 500, "InternalError")
	w := h.req("POST", "/f", body, "Idempotency-Key", key1)
	wantStatus(t, "retry runs again", w, 201)
	wantRuns(t, h, "t.failbefore", 2)
}

func testFailAfter(t *testing.T, d driver.Driver) {
	cfg, target := providerConfig(t)
	cfg.Logger = quietLogger()
	actions := effectActions(target)
	h := newHarness(t, d, cfg, func(h *harness, app *oke.App) {
		for e, act := range actions {
			name, act := "t.after."+string(e), act
			app.Handle(oke.POST("/"+name), oke.NewFlow(name, oke.Options{},
				func(ctx context.Context, in chargeIn, fx *oke.Fx) (oke.Response[int64], error) {
					h.counter(name).Add(1)
					if err := act(ctx, fx, h); err != nil {
						return oke.Response[int64]{}, err
					}
					return oke.Response[int64]{}, errors.New("failed after the effect: secret detail")
				}))
		}
	})
	for e := range actions {
		name := "t.after." + string(e)
		first := h.req("POST", "/"+name, body, "Idempotency-Key", key1)
		wantCode(t, name, first, 500, "InternalError")
		if strings.Contains(first.Body.String(), "secret detail") {
			t.Fatalf("%s: the cause leaked to the client: %s", name, first.Body)
		}
		w := h.req("POST", "/"+name, body, "Idempotency-Key", key1)
		wantCode(t, name+" retry", w, 500, "InternalError")
		if !replayed(w) {
			t.Fatalf("%s: a failure after a %s effect must be stored", name, e)
		}
		wantRuns(t, h, name, 1)
	}
}

func testFailAfterSecrets(t *testing.T, d driver.Driver) {
	h := newHarness(t, d, oke.Config{Logger: quietLogger(), Secrets: fakeProviders{}}, func(h *harness, app *oke.App) {
		app.Handle(oke.POST("/f"), oke.NewFlow("t.secretfail", oke.Options{},
			func(ctx context.Context, in chargeIn, fx *oke.Fx) (oke.Response[int64], error) {
				h.counter("t.secretfail").Add(1)
				if _, err := fx.Secret(ctx, "OKE_DRIVERTEST_SECRET"); err != nil {
					return oke.Response[int64]{}, err
				}
				return oke.Response[int64]{}, errors.New("boom")
			}))
	})
	h.req("POST", "/f", body, "Idempotency-Key", key1)
	if w := h.req("POST", "/f", body, "Idempotency-Key", key1); replayed(w) {
		t.Fatal("a failure after only a secret read must delete the row")
	}
	wantRuns(t, h, "t.secretfail", 2)
}

func testDeclaredFailure(t *testing.T, d driver.Driver) {
	h := newHarness(t, d, oke.Config{}, func(h *harness, app *oke.App) {
		app.Handle(oke.POST("/f"), oke.NewFlow("t.declared", oke.Options{},
			func(ctx context.Context, in chargeIn, fx *oke.Fx) (oke.Response[int64], error) {
				h.counter("t.declared").Add(1)
				return oke.Response[int64]{}, fx.Fail(402, "PaymentDeclined", "The card was declined.")
			}))
	})
	first := h.req("POST", "/f", body, "Idempotency-Key", key1)
	wantCode(t, "first", first, 402, "PaymentDeclined")
	w := h.req("POST", "/f", body, "Idempotency-Key", key1)
	wantCode(t, "retry", w, 402, "PaymentDeclined")
	if !replayed(w) || w.Body.String() != first.Body.String() {
		t.Fatalf("declared failure not replayed as itself: %s", w.Body)
	}
	wantRuns(t, h, "t.declared", 1)
}

// ---- crashes and leases -------------------------------------------------------

func testDefaultLease(t *testing.T, d driver.Driver) {
	release := make(chan struct{})
	started := make(chan struct{})
	h := newHarness(t, d, oke.Config{}, func(h *harness, app *oke.App) {
		app.Handle(oke.POST("/slow"), oke.NewFlow("t.deflease", oke.Options{},
			func(ctx context.Context, in chargeIn, fx *oke.Fx) (oke.Response[int64], error) {
				close(started)
				<-release
				return oke.Created(int64(1), ""), nil
			}))
	})
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- h.req("POST", "/slow", body, "Idempotency-Key", key1) }()
	waitFor(t, "the flow to start", started)
	defer func() { close(release); waitFor(t, "the request to end", done) }()
	row, err := h.d.Get(context.Background(), driver.Key{Tenant: "default", Principal: "anon", Flow: "t.deflease", Key: key1})
	if err != nil {
		t.Fatal(err)
	}
	if lease := row.LeaseUntil.Sub(row.CreatedAt); lease < 30*time.Second-slack || lease > 30*time.Second+slack {
		t.Fatalf("default lease %v, want 30s", lease)
	}
	w := h.req("POST", "/slow", body, "Idempotency-Key", key1)
	if ra, _ := strconv.Atoi(w.Header().Get("Retry-After")); w.Code != 409 || ra < 1 || ra > 30 {
		t.Fatalf("409 with Retry-After in [1, 30] expected: %d %q", w.Code, w.Header().Get("Retry-After"))
	}
}

func testLeaseRenewed(t *testing.T, d driver.Driver) {
	release := make(chan struct{})
	started := make(chan struct{})
	lease := 150 * time.Millisecond
	h := newHarness(t, d, oke.Config{Lease: lease}, func(h *harness, app *oke.App) {
		app.Handle(oke.POST("/slow"), oke.NewFlow("t.renew", oke.Options{},
			func(ctx context.Context, in chargeIn, fx *oke.Fx) (oke.Response[int64], error) {
				close(started)
				<-release
				return oke.Created(h.counter("t.renew").Add(1), ""), nil
			}))
	})
	done := make(chan struct{})
	go func() { h.req("POST", "/slow", body, "Idempotency-Key", key1); close(done) }()
	waitFor(t, "the flow to start", started)
	k := driver.Key{Tenant: "default", Principal: "anon", Flow: "t.renew", Key: key1}
	first, err := h.d.Get(context.Background(), k)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		row, err := h.d.Get(context.Background(), k)
		if err != nil {
			t.Fatal(err)
		}
		if row.LeaseUntil.After(first.LeaseUntil) && row.Owner == first.Owner {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the lease was never renewed while Do ran: %v", row.LeaseUntil)
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(release)
	waitFor(t, "the request to end", done)
	wantRuns(t, h, "t.renew", 1)
}

func testDisconnect(t *testing.T, d driver.Driver) {
	started := make(chan struct{})
	release := make(chan struct{})
	var sawCancel atomic.Bool
	h := newHarness(t, d, oke.Config{}, func(h *harness, app *oke.App) {
		app.Handle(oke.POST("/c"), oke.NewFlow("t.disc", oke.Options{},
			func(ctx context.Context, in chargeIn, fx *oke.Fx) (oke.Response[int64], error) {
				close(started)
				<-release
				if ctx.Err() != nil {
					sawCancel.Store(true)
				}
				return oke.Created(h.counter("t.disc").Add(1), ""), nil
			}))
	})
	ctx, cancel := context.WithCancel(context.Background())
	r := httptest.NewRequest("POST", "/c", strings.NewReader(body)).WithContext(ctx)
	r.Header.Set("Idempotency-Key", key1)
	done := make(chan struct{})
	go func() { h.app.ServeHTTP(httptest.NewRecorder(), r); close(done) }()
	waitFor(t, "the flow to start", started)
	cancel() // the client goes away
	close(release)
	waitFor(t, "the request to end", done)
	if sawCancel.Load() {
		t.Fatal("the client's disconnect cancelled the claimed Do")
	}
	if w := h.req("POST", "/c", body, "Idempotency-Key", key1); !replayed(w) || w.Code != 201 {
		t.Fatalf("the response of a disconnected client was not stored: %d", w.Code)
	}
	wantRuns(t, h, "t.disc", 1)
}

// fingerprintOf computes what the app stores for body on flow.
func fingerprintOf(flow string, in chargeIn) string {
	return idem.Fingerprint(flow, []byte(fmt.Sprintf(`{"amount":%d,"currency":%q}`, in.Amount, in.Currency)))
}

func testRunsAgainAfterLapse(t *testing.T, d driver.Driver) {
	h := newHarness(t, d, oke.Config{}, func(h *harness, app *oke.App) {
		app.Handle(oke.POST("/c"), h.chargeFlow("t.lapse", oke.Options{}))
	})
	// A process claimed the key and died: its lease lapses unrenewed.
	k := driver.Key{Tenant: "default", Principal: "anon", Flow: "t.lapse", Key: key1}
	if _, err := h.d.Claim(context.Background(), driver.ClaimRequest{Key: k, Fingerprint: fingerprintOf("t.lapse", chargeIn{100, "usd"}),
		Owner: "crashed-process", Lease: short, TTL: day}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(after)
	w := h.req("POST", "/c", body, "Idempotency-Key", key1)
	wantStatus(t, "after the lease lapsed", w, 201)
	if replayed(w) {
		t.Fatal("nothing was stored, yet the request was replayed")
	}
	wantRuns(t, h, "t.lapse", 1)
	if w := h.req("POST", "/c", body, "Idempotency-Key", key1); !replayed(w) {
		t.Fatal("the retried run's response was not stored")
	}
}

func testStaleHolder(t *testing.T, d driver.Driver) {
	startedA, releaseA := make(chan struct{}), make(chan struct{})
	startedB, releaseB := make(chan struct{}), make(chan struct{})
	var calls atomic.Int64
	h := newHarness(t, d, oke.Config{Lease: 3 * short, Logger: quietLogger()}, func(h *harness, app *oke.App) {
		app.Handle(oke.POST("/c"), oke.NewFlow("t.stale", oke.Options{},
			func(ctx context.Context, in chargeIn, fx *oke.Fx) (oke.Response[string], error) {
				if calls.Add(1) == 1 {
					close(startedA)
					<-releaseA
					return oke.Created("from A", ""), nil
				}
				close(startedB)
				<-releaseB
				return oke.Created("from B", ""), nil
			}))
	})
	// Renewals fail from here on, as if the store were out of reach of the
	// holders: A's lease lapses while it runs. (B's lapses too, but nobody
	// takes it from B.)
	h.fault.dropRenew.Store(true)
	doneA := make(chan *httptest.ResponseRecorder)
	go func() { doneA <- h.req("POST", "/c", body, "Idempotency-Key", key1) }()
	waitFor(t, "A to start", startedA)
	time.Sleep(3*after + 3*short) // A's lease lapses
	doneB := make(chan *httptest.ResponseRecorder)
	go func() { doneB <- h.req("POST", "/c", body, "Idempotency-Key", key1) }()
	select { // B took the key over and runs
	case <-startedB:
	case b := <-doneB:
		t.Fatalf("B did not take over A's lapsed key: %d %s", b.Code, b.Body)
	case <-time.After(time.Minute):
		t.Fatal("B neither ran nor answered")
	}
	close(releaseA)
	// A finishes while B holds the key: its Complete is fenced off, and it
	// answers what the row holds now — B still running: 409 — never its
	// own result, which no retry would ever see again.
	a := waitFor(t, "A to answer", doneA)
	wantCode(t, "the stale holder A", a, 409, "IdempotencyInProgress")
	if a.Header().Get("Retry-After") == "" || strings.Contains(a.Body.String(), "from A") {
		t.Fatalf("A: %d %v %s", a.Code, a.Header(), a.Body)
	}
	close(releaseB)
	if b := waitFor(t, "B to answer", doneB); b.Code != 201 || !strings.Contains(b.Body.String(), "from B") {
		t.Fatalf("B: %d %s", b.Code, b.Body)
	}
	w := h.req("POST", "/c", body, "Idempotency-Key", key1)
	if !replayed(w) || !strings.Contains(w.Body.String(), "from B") {
		t.Fatalf("the stale holder overwrote the new owner's result: %s", w.Body)
	}
}

// testStaleHolderAfterNewOwner: a holder whose lease lapsed finishes after
// the attempt that took its key over has stored its response: it answers
// that stored response (Idempotent-Replayed), not its own.
func testStaleHolderAfterNewOwner(t *testing.T, d driver.Driver) {
	startedA, releaseA := make(chan struct{}), make(chan struct{})
	var calls atomic.Int64
	h := newHarness(t, d, oke.Config{Lease: 3 * short, Logger: quietLogger()}, func(h *harness, app *oke.App) {
		app.Handle(oke.POST("/c"), oke.NewFlow("t.stale2", oke.Options{},
			func(ctx context.Context, in chargeIn, fx *oke.Fx) (oke.Response[string], error) {
				if calls.Add(1) == 1 {
					close(startedA)
					<-releaseA
					return oke.Created("from A", "/a"), nil
				}
				return oke.Created("from B", "/b"), nil
			}))
	})
	h.fault.dropRenew.Store(true) // A's lease lapses while it runs
	doneA := make(chan *httptest.ResponseRecorder)
	go func() { doneA <- h.req("POST", "/c", body, "Idempotency-Key", key1) }()
	waitFor(t, "A to start", startedA)
	var b *httptest.ResponseRecorder
	for deadline := time.Now().Add(time.Minute); ; {
		time.Sleep(short)
		if b = h.req("POST", "/c", body, "Idempotency-Key", key1); b.Code != 409 || time.Now().After(deadline) {
			break // B took the lapsed key over, ran and stored its answer
		}
	}
	if b.Code != 201 || replayed(b) || !strings.Contains(b.Body.String(), "from B") {
		t.Fatalf("B: %d %s", b.Code, b.Body)
	}
	close(releaseA)
	a := waitFor(t, "A to answer", doneA)
	if a.Code != 201 || !replayed(a) || !strings.Contains(a.Body.String(), "from B") || a.Header().Get("Location") != "/b" {
		t.Fatalf("the stale holder A answered %d replayed=%v %s (Location %q), want B's stored 201", a.Code, replayed(a), a.Body, a.Header().Get("Location"))
	}
	if w := h.req("POST", "/c", body, "Idempotency-Key", key1); !replayed(w) || !strings.Contains(w.Body.String(), "from B") {
		t.Fatalf("retry: %d %s", w.Code, w.Body)
	}
}

// testCompleteFails: when the response cannot be stored after the flow ran,
// the client is told the outcome is unknown (503 OutcomeUnknown, with
// Retry-After), not handed a live answer no retry could replay, nor told
// the request did not run.
func testCompleteFails(t *testing.T, d driver.Driver) {
	h := newHarness(t, d, oke.Config{Lease: 3 * short, Logger: quietLogger()}, func(h *harness, app *oke.App) {
		app.Handle(oke.POST("/c"), h.chargeFlow("t.unknown", oke.Options{}))
	})
	h.fault.failComplete.Store(true)
	w := h.req("POST", "/c", body, "Idempotency-Key", key1)
	wantCode(t, "completion failed", w, 503, "OutcomeUnknown")
	if w.Header().Get("Retry-After") == "" {
		t.Fatal("503 OutcomeUnknown without Retry-After")
	}
	wantRuns(t, h, "t.unknown", 1)
	h.fault.failComplete.Store(false)
	// The row lapses; the retry with the same key runs again and is stored
	// (a non-durable flow is at least once across such a failure).
	var retry *httptest.ResponseRecorder
	for deadline := time.Now().Add(time.Minute); ; {
		if retry = h.req("POST", "/c", body, "Idempotency-Key", key1); retry.Code != 409 || time.Now().After(deadline) {
			break
		}
		time.Sleep(short)
	}
	wantStatus(t, "retry", retry, 201)
	if w := h.req("POST", "/c", body, "Idempotency-Key", key1); !replayed(w) {
		t.Fatalf("the retry's response was not stored: %d", w.Code)
	}
}

func testFailClosed(t *testing.T, d driver.Driver) {
	h := newHarness(t, d, oke.Config{Logger: quietLogger()}, func(h *harness, app *oke.App) {
		app.Handle(oke.POST("/c"), h.chargeFlow("t.closed", oke.Options{}))
	})
	h.fault.failAll.Store(true)
	w := h.req("POST", "/c", body, "Idempotency-Key", key1)
	wantCode(t, "store down", w, 503, "StoreUnavailable")
	if w.Header().Get("Retry-After") == "" {
		t.Fatal("503 without Retry-After")
	}
	wantRuns(t, h, "t.closed", 0)
	h.fault.failAll.Store(false)
	wantStatus(t, "store back", h.req("POST", "/c", body, "Idempotency-Key", key1), 201)
}

func testStreamFlushes(t *testing.T, d driver.Driver) {
	next := make(chan struct{})
	h := newHarness(t, d, oke.Config{}, func(h *harness, app *oke.App) {
		app.Handle(oke.POST("/export"), oke.NewStream("t.flush", oke.Options{},
			func(ctx context.Context, in struct{}, fx *oke.Fx, w http.ResponseWriter) error {
				w.Header().Set("Content-Type", "text/plain")
				io.WriteString(w, "first\n")
				<-next // the client must see "first" before we go on
				io.WriteString(w, "second\n")
				return nil
			}))
	})
	srv := httptest.NewServer(h.app)
	defer srv.Close()
	req, _ := http.NewRequest("POST", srv.URL+"/export", nil)
	req.Header.Set("Idempotency-Key", key1)
	resp, err := srv.Client().Do(req)
	if err != nil {
		close(next)
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	close(next)
	if err != nil || line != "first\n" {
		t.Fatalf("first chunk: %q %v", line, err)
	}
	if len(resp.TransferEncoding) == 0 || resp.TransferEncoding[0] != "chunked" {
		t.Fatalf("not chunked: %v", resp.TransferEncoding)
	}
	rest, _ := io.ReadAll(br)
	if string(rest) != "second\n" {
		t.Fatalf("rest %q", rest)
	}
}

func testTooLarge(t *testing.T, d driver.Driver) {
	big := strings.Repeat("x", 2048)
	h := newHarness(t, d, oke.Config{MaxStoredResponse: 1024}, func(h *harness, app *oke.App) {
		app.Handle(oke.POST("/big"), oke.NewFlow("t.big", oke.Options{},
			func(ctx context.Context, in struct{}, fx *oke.Fx) (oke.Response[string], error) {
				h.counter("t.big").Add(1)
				fx.Raw(ctx, "write", func(context.Context) error { return nil })
				return oke.OK(big), nil
			}))
	})
	first := h.req("POST", "/big", "", "Idempotency-Key", key1)
	if first.Code != 200 || !strings.Contains(first.Body.String(), big) {
		t.Fatalf("the live response must be delivered whole: %d (%d bytes)", first.Code, first.Body.Len())
	}
	w := h.req("POST", "/big", "", "Idempotency-Key", key1)
	wantCode(t, "retry", w, 410, "IdempotentResponseNotStored")
	if !replayed(w) {
		t.Fatal("tombstone not marked replayed")
	}
	wantRuns(t, h, "t.big", 1)
}

func testHTTPSweep(t *testing.T, d driver.Driver) {
	h := newHarness(t, d, oke.Config{}, func(h *harness, app *oke.App) {
		app.Handle(oke.POST("/short"), h.chargeFlow("t.sweep", oke.Options{Idempotency: oke.Idempotency{TTL: "20ms"}}))
		app.Handle(oke.POST("/long"), h.chargeFlow("t.keep", oke.Options{}))
	})
	h.req("POST", "/short", body, "Idempotency-Key", key1)
	h.req("POST", "/short", body, "Idempotency-Key", key2)
	h.req("POST", "/long", body, "Idempotency-Key", key1)
	time.Sleep(after)
	// key2's row is replaced on its next claim.
	if w := h.req("POST", "/short", body, "Idempotency-Key", key2); replayed(w) {
		t.Fatal("an expired row was replayed")
	}
	n, err := h.app.Sweep(context.Background())
	// key2's new row has a 20ms TTL too: on a loaded machine it may have
	// expired by the sweep, and then it is swept as well.
	_, err2 := h.d.Get(context.Background(), driver.Key{Tenant: "default", Principal: "anon", Flow: "t.sweep", Key: key2})
	switch {
	case err != nil || n < 1 || n > 2:
		t.Fatalf("sweep deleted %d rows (%v), want 1 (key1's expired row), or 2 if key2's new row expired too", n, err)
	case n == 1 && errors.Is(err2, driver.ErrNotFound):
		t.Fatalf("sweep deleted 1 row but key2's new row is gone too")
	case n == 2 && !errors.Is(err2, driver.ErrNotFound):
		t.Fatalf("sweep deleted 2 rows but key2's new row is still there (%v)", err2)
	}
	if _, err := h.d.Get(context.Background(), driver.Key{Tenant: "default", Principal: "anon", Flow: "t.sweep", Key: key1}); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("expired row still there: %v", err)
	}
	if _, err := h.d.Get(context.Background(), driver.Key{Tenant: "default", Principal: "anon", Flow: "t.keep", Key: key1}); err != nil {
		t.Fatalf("unexpired row swept: %v", err)
	}
}

func testPeriodicSweep(t *testing.T, d driver.Driver) {
	h := newHarness(t, d, oke.Config{SweepInterval: short}, func(h *harness, app *oke.App) {
		app.Handle(oke.POST("/short"), h.chargeFlow("t.periodic", oke.Options{Idempotency: oke.Idempotency{TTL: "20ms"}}))
	})
	h.req("POST", "/short", body, "Idempotency-Key", key1)
	k := driver.Key{Tenant: "default", Principal: "anon", Flow: "t.periodic", Key: key1}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := h.d.Get(context.Background(), k)
		if errors.Is(err, driver.ErrNotFound) {
			return // swept in the background, with no request touching the key
		}
		if time.Now().After(deadline) {
			t.Fatalf("the periodic sweep never deleted the expired row (last Get: %v)", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// testExpiryUnderLoad: the background sweep runs (every few milliseconds,
// at its default pace) while requests arrive on keys of two flows, one
// whose rows expire almost at once and one whose rows live an hour, each
// request from one of several clients at once. Every live key replays its
// first answer however often the sweep ran meanwhile (nothing unexpired
// is dropped: its flow runs once per key), and every short-lived key
// retried once its TTL has passed runs again rather than replaying
// (no expired row replays, whether the sweep deleted it yet or not), and
// the sweep does delete the expired rows nobody retries.
func testExpiryUnderLoad(t *testing.T, d driver.Driver) {
	const ttl = 30 * time.Millisecond
	h := newHarness(t, d, oke.Config{SweepInterval: 5 * time.Millisecond}, func(h *harness, app *oke.App) {
		app.Handle(oke.POST("/short"), h.chargeFlow("t.expiry.short", oke.Options{Idempotency: oke.Idempotency{TTL: ttl.String()}}))
		app.Handle(oke.POST("/live"), h.chargeFlow("t.expiry.live", oke.Options{Idempotency: oke.Idempotency{TTL: "1h"}}))
	})
	const clients, perClient = 8, 12
	keyOf := func(kind string, c, i int) string { return fmt.Sprintf("expiry-%s-%02d-%03d", kind, c, i) }
	first := make([][]string, clients) // each live key's first answer
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for c := range clients {
		first[c] = make([]string, perClient)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perClient {
				w := h.req("POST", "/live", body, "Idempotency-Key", keyOf("live", c, i))
				if w.Code != http.StatusCreated || replayed(w) {
					errs <- fmt.Errorf("live key %s, first request: %d (replayed %v) %s", keyOf("live", c, i), w.Code, replayed(w), w.Body)
					return
				}
				first[c][i] = w.Body.String()
				if w := h.req("POST", "/short", body, "Idempotency-Key", keyOf("short", c, i)); w.Code != http.StatusCreated || replayed(w) {
					errs <- fmt.Errorf("short key %s, first request: %d (replayed %v) %s", keyOf("short", c, i), w.Code, replayed(w), w.Body)
					return
				}
				// Replay every live key so far while the sweep runs.
				for j := 0; j <= i; j++ {
					w := h.req("POST", "/live", body, "Idempotency-Key", keyOf("live", c, j))
					if !replayed(w) || w.Body.String() != first[c][j] {
						errs <- fmt.Errorf("live key %s, replay while the sweep runs: %d (replayed %v) %s; want its first answer %s",
							keyOf("live", c, j), w.Code, replayed(w), w.Body, first[c][j])
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	time.Sleep(2 * ttl) // every short-lived row has expired by now
	for c := range clients {
		for i := range perClient {
			if i%2 == 0 { // half of them retried, the rest left to the sweep
				if w := h.req("POST", "/short", body, "Idempotency-Key", keyOf("short", c, i)); w.Code != http.StatusCreated || replayed(w) {
					t.Fatalf("short key %s, retried after its TTL: %d (replayed %v) %s; want a new run (201, not a replay)",
						keyOf("short", c, i), w.Code, replayed(w), w.Body)
				}
			}
			if w := h.req("POST", "/live", body, "Idempotency-Key", keyOf("live", c, i)); !replayed(w) || w.Body.String() != first[c][i] {
				t.Fatalf("live key %s, replay after the sweeps: %d (replayed %v) %s; want its first answer", keyOf("live", c, i), w.Code, replayed(w), w.Body)
			}
		}
	}
	wantRuns(t, h, "t.expiry.live", clients*perClient)
	wantRuns(t, h, "t.expiry.short", clients*perClient+clients*perClient/2)
	// The sweep deletes the expired rows nobody retried.
	deadline := time.Now().Add(30 * time.Second)
	for c := range clients {
		for i := 1; i < perClient; i += 2 {
			k := driver.Key{Tenant: "default", Principal: "anon", Flow: "t.expiry.short", Key: keyOf("short", c, i)}
			for {
				_, err := h.d.Get(context.Background(), k)
				if errors.Is(err, driver.ErrNotFound) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the background sweep never deleted expired row %s (last Get: %v)", k.Key, err)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
	}
}

func testConcurrentOneKey(t *testing.T, d driver.Driver) {
	h := newHarness(t, d, oke.Config{}, func(h *harness, app *oke.App) {
		// The bound flow and the one it calls have their own names (an app
		// refuses two flows with one name); the runs counted are the
		// called flow's, which does the work.
		base := h.chargeFlow("t.hundred", oke.Options{})
		app.Handle(oke.POST("/c"), oke.NewFlow("t.hundred.outer", oke.Options{},
			func(ctx context.Context, in chargeIn, fx *oke.Fx) (oke.Response[chargeOut], error) {
				time.Sleep(5 * time.Millisecond) // widen the window
				return callDo(ctx, base, in, fx)
			}))
	})
	const n = 100
	var wg sync.WaitGroup
	start := make(chan struct{})
	codes := make([]int, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			codes[i] = h.req("POST", "/c", body, "Idempotency-Key", key1).Code
		}(i)
	}
	close(start)
	wg.Wait()
	wantRuns(t, h, "t.hundred", 1)
	for i, c := range codes {
		if c != 201 && c != 409 {
			t.Fatalf("request %d: status %d, want 201 (live or replay) or 409", i, c)
		}
	}
}

// callDo runs f's function as part of the calling flow.
func callDo(ctx context.Context, f *oke.Flow[chargeIn, chargeOut], in chargeIn, fx *oke.Fx) (oke.Response[chargeOut], error) {
	out, err := oke.Call(ctx, fx, f, in)
	if err != nil {
		return oke.Response[chargeOut]{}, err
	}
	return oke.Created(out, ""), nil
}

func testWebhookDedupe(t *testing.T, d driver.Driver) {
	type event struct {
		ID   string `json:"id"`
		Type string `json:"type"`
	}
	h := newHarness(t, d, oke.Config{}, func(h *harness, app *oke.App) {
		app.Handle(oke.Webhook("/hook", "id"), oke.NewFlow("t.hook", oke.Options{Idempotency: oke.Off},
			func(ctx context.Context, in event, fx *oke.Fx) (oke.Response[string], error) {
				h.counter("t.hook").Add(1)
				fx.Raw(ctx, "record", func(context.Context) error { return nil })
				return oke.OK("handled " + in.ID), nil
			}))
	})
	first := h.req("POST", "/hook", `{"id":"evt_1","type":"charge.succeeded"}`)
	wantStatus(t, "first delivery", first, 200)
	second := h.req("POST", "/hook", `{"type":"charge.succeeded","id":"evt_1"}`, "Idempotency-Key", key1)
	if !replayed(second) || second.Body.String() != first.Body.String() {
		t.Fatalf("second delivery: %d %s", second.Code, second.Body)
	}
	wantStatus(t, "another event", h.req("POST", "/hook", `{"id":"evt_2","type":"x"}`), 200)
	// The dedupe field is required by the input type's own rule (not
	// omitempty): the decoder refuses the body before the binding looks.
	wantCode(t, "no id", h.req("POST", "/hook", `{"type":"x"}`), 400, "ValidationFailed")
	wantRuns(t, h, "t.hook", 2)
}
