package oke

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/memory"
	"github.com/okengine/oke/internal/cron"
	"github.com/okengine/oke/internal/deadline"
	"github.com/okengine/oke/internal/idem"
	"github.com/okengine/oke/internal/journal"
	"github.com/okengine/oke/internal/lease"
	"github.com/okengine/oke/internal/tracing"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Gate is the app's authentication and authorization hook. It runs before
// anything else on every request and yields the caller's identity, or an
// error: return Unauthorized(…) for 401 and Forbidden(…) for 403 (any other
// *Error is sent as is; a plain error is 500). Empty fields of the identity
// default to tenant "default" and principal "anon".
//
// The principal is part of the Idempotency-Key scope, so the same key from
// two principals is two records.
type Gate func(r *http.Request, flow string) (Identity, error)

// Config configures an App. The zero value is usable: a memory driver, no
// authentication, 30 s leases, 1 MiB bodies.
type Config struct {
	// Driver stores idempotency rows. Nil means a new memory driver (for
	// tests: nothing survives the process). The app does not close it.
	Driver driver.Driver
	// Gate authenticates requests. Nil lets everyone in as anon in tenant
	// "default".
	Gate Gate
	// Lease is the in-progress lease of a claimed key, renewed every Lease/3
	// while the flow runs. Zero means 30 s.
	Lease time.Duration
	// MaxBodyBytes limits request bodies (413 past it). Zero means 1 MiB.
	MaxBodyBytes int64
	// ClaimFirst makes every flow whose Idempotency.Claim is ClaimAuto claim
	// its key first (ClaimFirst), where oke would otherwise hold the claim
	// in the flow's transaction when its contract allows (ClaimInTx): for
	// comparing the two, or for listings that must show keys in progress.
	ClaimFirst bool
	// MaxStoredResponse limits the body of a stored response. A larger
	// response is delivered live once and a 410 IdempotentResponseNotStored
	// tombstone is stored in its place, so the key still never runs the
	// flow twice. Zero means 1 MiB.
	MaxStoredResponse int
	// SweepInterval is how often expired rows are deleted in the
	// background (they are also replaced on the next claim of their key).
	// Zero means one minute; negative disables the sweep.
	SweepInterval time.Duration
	// SweepRate paces the background sweep: at most this many expired
	// rows deleted per second, in batches, each followed by a pause of at
	// least four times what the batch took, so that the sweep has the
	// store for at most a fifth of the time whatever the store's speed
	// (a deployment that expires what it takes in sweeps all day, beside
	// the requests). Zero means 10 000 a second, five times the demo's
	// charge rate on a 2-core machine; negative removes the rate (the
	// pause after each batch stays). App.Sweep, what an operator asks
	// for, is not paced.
	SweepRate int

	// Unavailable tells which errors a flow returns mean that a database or
	// service it needs could not be reached or written (a lost connection,
	// a full disk, a busy lock) rather than a fault of the request: such a
	// failure before any non-read effect answers 503 Unavailable (the key
	// is released; a retry may work) instead of 500. After a non-read
	// effect it is stored as 500 like any failure, since part of the
	// request happened and running it again could do that part twice.
	// Errors matching
	// driver.ErrUnavailable, and those the driver's own database reports
	// (driver.TxDriver.Unavailable), count already; set this for Config.DB
	// and other dependencies.
	Unavailable func(err error) bool

	// DB is the app's own database, for Fx.Tx when the driver keeps its
	// rows elsewhere (memory, file): the flow's transaction then commits
	// before the response is stored (at least once). A driver that keeps
	// its rows in SQL (driver/postgres) opens Fx.Tx on its own database
	// instead, where the response commits with the flow's writes (exactly
	// once), and DB is not used.
	DB *sql.DB

	Sender        Sender        // for Fx.Send
	LanguageModel LanguageModel // for Fx.Ask
	Embedder      Embedder      // for Fx.Embed
	Secrets       Secrets       // for Fx.Secret; nil means EnvSecrets
	HTTPClient    *http.Client  // for Fx.Fetch; nil means http.DefaultClient
	// Logger receives background failures; nil means slog.Default().
	// Records logged while a request or a run is traced carry its
	// trace_id and span_id (docs/tracing.md).
	Logger *slog.Logger
	// TracerProvider is where oke's OpenTelemetry spans go: a server span
	// per request to a flow, and under it the flow, its durable steps and
	// their attempts, and each store call (docs/tracing.md). Nil means
	// otel.GetTracerProvider(), which does nothing until the program
	// installs a provider (otel.SetTracerProvider); oke brings no
	// exporter of its own.
	TracerProvider trace.TracerProvider

	// RetryDelay is how long a run whose step result could not be saved
	// (the store was unreachable) waits before it is picked up again. Zero
	// means five minutes.
	RetryDelay time.Duration
	// RetryInline is the longest retry wait of a step (RetryPolicy, before
	// jitter) that is waited inside the execution, holding the run's lease;
	// a longer wait parks the run in the journal until it ends, so that it
	// survives a restart (and the request that started the run is answered
	// 503 OutcomeUnknown meanwhile; a retry with its key gets the run's
	// answer once it has one). Zero means 1 s; negative parks every retry.
	RetryInline time.Duration
	// DeadLetterAfter is how many failed pick-ups in a row (the holder's
	// lease lapsed — a crash, a hang, a lost lease — or the store failed)
	// dead-letter a run: at its next pick-up it becomes driver.RunDead
	// instead of running, and stays so until App.Resume (or the console,
	// or oke runs resume) makes it due again. Zero means 10; negative
	// never dead-letters.
	DeadLetterAfter int
	// PollInterval is how often the scheduler looks for due runs (runs
	// whose lease lapsed, woken sleeps, retries). Zero means 250 ms;
	// negative disables the scheduler (runs are then only resumed by
	// retried requests).
	PollInterval time.Duration
	// WaitPollInterval bounds how long a request held by Prefer: wait goes
	// without reading its key's row when nothing tells it the row changed
	// (a completion in this process, or the driver's notification of one in
	// another: driver.KeyWaiter, Postgres). The reads start at 20 ms and
	// double up to it. Zero means 250 ms, or 5 s while the driver's
	// notifications are heard (the poll is then a safety net for a lost
	// notification); negative means the row is read only when
	// told (the request still ends when its wait is up).
	//
	// The reads are per key, not per request: all the requests held for
	// one key share one watcher, which announces the wait to the driver
	// once, reads the row once when told it changed, and hands the answer
	// to all of them. On a driver that reads many rows at once
	// (driver.RowsGetter: Postgres) a key is read on its own only until
	// the interval reaches this bound; then one statement every interval
	// reads the rows of all the keys the app waits for.
	WaitPollInterval time.Duration
	// MaxWaitersPerKey bounds how many requests Prefer: wait holds at once
	// for one key, and MaxWaiters how many it holds in all (for keys in
	// progress and for parked durable runs, together). A request past either is answered at once as if it had not
	// asked to wait: 409 IdempotencyInProgress with Retry-After, and no
	// Preference-Applied (RFC 7240 lets a server ignore a preference), so
	// a client retries after Retry-After; it counts in
	// oke_idempotency_wait_refused_total. Zero means 32 per key, and in
	// all a quarter of MaxInFlight (256 by default: a held request takes a
	// place of MaxInFlight too, and waiting must not take them all), or
	// 1024 when MaxInFlight is unbounded; negative holds no request
	// (Prefer: wait is ignored).
	MaxWaitersPerKey int
	MaxWaiters       int
	// MaxConcurrentRuns bounds how many runs the scheduler executes at
	// once. Zero means 16.
	MaxConcurrentRuns int

	// StoreTimeout bounds every call oke makes to its store and each
	// transaction statement it issues itself: an idempotency claim or
	// lookup, a completion or release, a journal call (creating, taking,
	// saving, finishing a run), the BEGIN of the flow's transaction (its
	// first statement, which on driver/postgres also carries the key's
	// claim) and its COMMIT. A call that does not answer in time fails
	// (its connection abandoned, on Postgres) and the request is answered
	// at once: 503 StoreUnavailable when nothing of the flow ran, 503
	// OutcomeUnknown when it may have (a COMMIT or a completion that timed
	// out: the key stays held until its lease lapses, then the retry
	// replays or runs again), both with Retry-After. It bounds the flow's
	// own statements through Fx.Store and Fx.Tx too, each with the reading
	// of its rows, unless the context they are given has a deadline of its
	// own (the flow's Timeout option, or one the flow set): a database
	// that does not answer in time fails the statement with an error that
	// is driver.ErrUnavailable, so the flow answers 503 Unavailable (or
	// OutcomeUnknown after a write) instead of waiting; a durable step it
	// fails is not retried in process but with its run, later. Zero means
	// 5 s; negative means no bound (a hung store then holds every request
	// until it answers).
	StoreTimeout time.Duration
	// MaxInFlight bounds the requests to unary flows this app works on at
	// once (from when their input and key checked out until answered).
	// One more is shed at once, not queued: 503 StoreUnavailable (the
	// request was not run) with Retry-After, counted in
	// oke_requests_shed_total. It keeps a slow or hung store from piling
	// up goroutines and memory with the backlog. Streams and handlers
	// mounted with HandleHTTP (metrics, health checks) are not counted.
	// Zero means 1024; negative means no bound.
	MaxInFlight int

	// Clock is the time durable runs count in: when a durable sleep ends,
	// when a run released for a retry is due again. nil means time.Now.
	// Tests set a fake one to make sleeps pass at once (oketest.Clock);
	// give the driver the same clock (memory.WithClock), which decides
	// when a parked run is due and when a lease has lapsed.
	Clock func() time.Time
}

// The defaults of Config.StoreTimeout and Config.MaxInFlight.
const (
	DefaultStoreTimeout = 5 * time.Second
	DefaultMaxInFlight  = 1024
)

// StoreTimeout is Config.StoreTimeout as the app uses it (the default
// when the Config left it zero; zero or less: no bound): tools that call
// the app's store themselves, as the admin API does, bound each call by it.
func (a *App) StoreTimeout() time.Duration { return a.cfg.StoreTimeout }

// bound bounds one store call, op, on ctx by Config.StoreTimeout and
// traces it (deadline.Call): call end with its error.
func (a *App) bound(ctx context.Context, op string) (_ context.Context, end func(error) error) {
	return deadline.Call(ctx, a.cfg.StoreTimeout, op)
}

// App is a set of flows bound to HTTP routes. It is an http.Handler and
// mounts under any router. Build it with New, bind flows with Handle, then
// call Start (ServeHTTP calls it on first use if you do not).
type App struct {
	cfg     Config
	engine  idem.Engine
	journal driver.Journal // nil when the driver keeps no journal
	// runs is journal with each call bounded by Config.StoreTimeout: what
	// oke calls. Look for journal's optional interfaces on journal.
	runs driver.Journal
	// busy counts the requests in flight, at most Config.MaxInFlight.
	busy   atomic.Int64
	sched  journal.Scheduler
	done   completions      // wakes requests that wait for a key (Prefer: wait)
	waits  keyWaits         // the requests held by Prefer: wait, by key (wait.go)
	paces  paces            // the flows' recent durations, for Retry-After (retryafter.go)
	waiter driver.KeyWaiter // the driver's notifications of keys completed elsewhere, if it has them
	unhear func()           // stops the driver's HearWaiters; nil until Start
	leases *lease.Pool      // renews claims' and runs' leases; closed by Close
	base   context.Context  // cancelled when Close gives up waiting
	cancel context.CancelFunc
	log    *slog.Logger // Config.Logger, adding trace ids (tracing.Handler)
	tracer trace.Tracer // Config.TracerProvider's, when set; else the global's (tracing)
	// globalTracer caches the tracer of otel.GetTracerProvider() (tracing).
	globalTracer atomic.Pointer[tracerOf]
	mux          *http.ServeMux
	flows        map[string]*flow
	routes       []*route
	metrics      *metrics
	clock        cron.Clock // the schedules' (Cron); nil until Start: the real clock

	// Results by key (results.go): ended wakes the waiters for a run's end
	// (the requests held for one count in waits).
	ended runEnds
	// signalWaits: run ID → the signal a wait of it parked for, from
	// AwaitSignal until finish parks the run (signal.go).
	signalWaits sync.Map

	mu       sync.Mutex
	problems []error
	// contractWarnings are what check found of the flows' generated
	// contracts (stale, missing), logged by Start.
	contractWarnings []string

	startOnce sync.Once
	startErr  error
	started   atomic.Bool

	subsMu sync.Mutex
	subs   atomic.Pointer[[]*subscriber]

	closing  atomic.Bool
	inflight sync.WaitGroup
	stop     chan struct{}
	// onSweepPause, when set (tests), is told each pause of the background
	// sweep before it waits.
	onSweepPause func(time.Duration)
	// feedsEnd is closed by Shutdown (or Close): live feeds end.
	feedsEnd     chan struct{}
	feedsEndOnce sync.Once
	bg           sync.WaitGroup
}

// route is one binding of one flow.
type route struct {
	b       Binding
	f       *flow
	params  []string
	honors  bool // the binding and flow honor an Idempotency-Key
	dedupe  []string
	dedupeT time.Duration
	span    string // its requests' span name (spanName)
}

// New returns an app with cfg.
func New(cfg Config) *App {
	if cfg.Driver == nil {
		cfg.Driver = memory.New()
	}
	if cfg.Lease <= 0 {
		cfg.Lease = idem.DefaultLease
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 1 << 20
	}
	if cfg.MaxStoredResponse <= 0 {
		cfg.MaxStoredResponse = 1 << 20
	}
	if cfg.SweepInterval == 0 {
		cfg.SweepInterval = time.Minute
	}
	if cfg.SweepRate == 0 {
		cfg.SweepRate = DefaultSweepRate
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if _, ok := cfg.TracerProvider.(noop.TracerProvider); ok {
		cfg.TracerProvider = nil
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.RetryDelay <= 0 {
		cfg.RetryDelay = 5 * time.Minute
	}
	if cfg.RetryInline == 0 {
		cfg.RetryInline = time.Second
	}
	if cfg.DeadLetterAfter == 0 {
		cfg.DeadLetterAfter = 10
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 250 * time.Millisecond
	}
	if cfg.MaxConcurrentRuns <= 0 {
		cfg.MaxConcurrentRuns = 16
	}
	if cfg.StoreTimeout == 0 {
		cfg.StoreTimeout = DefaultStoreTimeout
	}
	if cfg.MaxInFlight == 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	a := &App{
		cfg:      cfg,
		log:      slog.New(tracing.Handler{Handler: cfg.Logger.Handler()}),
		mux:      http.NewServeMux(),
		flows:    make(map[string]*flow),
		metrics:  newMetrics(),
		stop:     make(chan struct{}),
		feedsEnd: make(chan struct{}),
	}
	if cfg.TracerProvider != nil {
		a.tracer = cfg.TracerProvider.Tracer(tracing.Scope)
		tracing.On()
	}
	a.journal, _ = cfg.Driver.(driver.Journal)
	a.waiter, _ = cfg.Driver.(driver.KeyWaiter)
	a.runs = deadline.Journal(a.journal, cfg.StoreTimeout)
	a.sched = journal.Scheduler{J: a.journal, Poll: cfg.PollInterval, Slots: cfg.MaxConcurrentRuns, Run: a.resume, Log: a.log,
		StoreTimeout: cfg.StoreTimeout}
	a.base, a.cancel = context.WithCancel(context.Background())
	a.leases = lease.NewPool()
	a.engine = idem.Engine{Driver: cfg.Driver, Lease: cfg.Lease, Leases: a.leases, StoreTimeout: cfg.StoreTimeout, OnError: func(k driver.Key, op string, err error) {
		a.log.Error("oke: background idempotency failure", "op", op, "flow", k.Flow, "err", err)
	}}
	a.mux.HandleFunc("/", a.notFound)
	return a
}

func (a *App) problem(err error) {
	a.mu.Lock()
	a.problems = append(a.problems, err)
	a.mu.Unlock()
}

// Handle binds flow h to b. Mistakes (a bad path, two flows with one name,
// a route bound twice) are reported by Start, which refuses to start.
func (a *App) Handle(b Binding, h Handler) {
	f := h.core()
	if f.name == "" || strings.ContainsAny(f.name, " /{}") {
		a.problem(fmt.Errorf("flow %q: a flow name must be non-empty without spaces, slashes or braces (e.g. \"payments.charge\")", f.name))
		return
	}
	if prev, ok := a.flows[f.name]; ok && prev != f {
		a.problem(fmt.Errorf("flow %q: two different flows have this name; rename one", f.name))
		return
	}
	if f.inputErr != nil {
		a.problem(fmt.Errorf("flow %q: input %s: %w; fix the tag (see oke.NewFlow for the tags and their syntax)", f.name, f.inType, f.inputErr))
		return
	}
	a.flows[f.name] = f
	if f.metrics == nil {
		f.metrics = a.metrics.forFlow(f.name)
	}
	if b.routeless() {
		a.routes = append(a.routes, &route{b: b, f: f})
		return
	}
	if b.Method == "" || (!b.rpc && !strings.HasPrefix(b.Path, "/")) {
		a.problem(fmt.Errorf("flow %q: binding %s: the path must start with \"/\"", f.name, b))
		return
	}
	pattern := b.pattern(f.name)
	rt := &route{b: b, f: f, span: pattern}
	params, err := pathParams(pattern)
	if err != nil {
		a.problem(fmt.Errorf("flow %q: %w", f.name, err))
		return
	}
	rt.params = params
	if b.dedupeField != "" {
		rt.dedupe = strings.Split(b.dedupeField, ".")
	}
	if err := register(a.mux, pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.serve(rt, w, r)
	})); err != nil {
		a.problem(fmt.Errorf("flow %q: binding %s: %v", f.name, b, err))
		return
	}
	a.routes = append(a.routes, rt)
}

// register adds a pattern to mux, turning its panic on a bad or conflicting
// pattern into an error.
func register(mux *http.ServeMux, pattern string, h http.Handler) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	mux.Handle(pattern, h)
	return nil
}

// HandleHTTP mounts a plain http.Handler (metrics, health checks, a console)
// on a ServeMux pattern beside the flows.
func (a *App) HandleHTTP(pattern string, h http.Handler) {
	if err := register(a.mux, pattern, h); err != nil {
		a.problem(fmt.Errorf("route %q: %v", pattern, err))
	}
}

// Start checks every flow's options against its bindings — the same checks
// as the extract tool — and starts background work (the sweep of expired
// rows). It returns every problem found, each naming the flow, the option
// and the fix; an app whose check fails must not serve. Calling Start more
// than once returns the first result.
func (a *App) Start(ctx context.Context) error {
	a.startOnce.Do(func() {
		a.startErr = a.check()
		if a.startErr != nil {
			return
		}
		for _, w := range a.contractWarnings {
			// Once per process and logger: a test or a benchmark that
			// starts many apps of the same flows is told once.
			if _, seen := contractWarned.LoadOrStore(contractWarning{a.cfg.Logger, w}, true); !seen {
				a.log.Warn("oke: " + w)
			}
		}
		if a.cfg.SweepInterval > 0 {
			a.bg.Add(1)
			go a.sweepLoop()
		}
		if a.journal != nil && a.cfg.PollInterval > 0 {
			a.sched.Flows = a.runFlows()
			a.sched.Start(a.base)
			a.bg.Add(1)
			go a.warnForeignRuns()
		}
		a.startSchedules()
		if a.waiter != nil {
			// Hear other instances' waits for keys, so that completing
			// one here notifies them (Prefer: wait).
			a.unhear = a.waiter.HearWaiters()
		}
		a.started.Store(true)
	})
	return a.startErr
}

// Check runs the start-up checks without starting anything.
func (a *App) Check() error { return a.check() }

func (a *App) check() error {
	a.mu.Lock()
	errs := append([]error(nil), a.problems...)
	a.mu.Unlock()
	a.contractWarnings = a.useContracts()
	for _, n := range sortedNames(a.flows) {
		errs = append(errs, a.flows[n].checkOptions()...)
	}
	for _, rt := range a.routes {
		if err := rt.check(); err != nil {
			errs = append(errs, err)
		}
		if a.journal == nil && (rt.f.opts.Durable || rt.b.event != "" || rt.b.sched != nil) {
			errs = append(errs, fmt.Errorf("flow %q: binding %s: durable flows, event and schedule bindings need a driver that keeps a journal (memory or file); fix: use such a driver, or drop Durable", rt.f.name, rt.b))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return &ContractError{Problems: errs}
}

// checkOptions validates a flow's own options and parses its TTL.
func (f *flow) checkOptions() []error {
	var errs []error
	m := f.opts.Idempotency
	f.ttl = idem.DefaultTTL
	if m.TTL != "" {
		ttl, err := idem.ParseTTL(m.TTL)
		if err != nil {
			errs = append(errs, fmt.Errorf("flow %q: option Idempotency.TTL: %v; fix: write a positive integer and one of ms, s, m, h, d, e.g. TTL: \"24h\"", f.name, err))
		} else {
			f.ttl = ttl
		}
	}
	if m.Mode > ModeOff {
		errs = append(errs, fmt.Errorf("flow %q: option Idempotency.Mode %d is not a mode; fix: use oke.ModeAuto, oke.ModeRequired or oke.ModeOff", f.name, m.Mode))
	}
	for _, e := range f.opts.Effects {
		if _, ok := effectBits[e]; !ok {
			errs = append(errs, fmt.Errorf("flow %q: option Effects: unknown effect %q; fix: use the oke.Effect constants", f.name, e))
		}
	}
	f.claim = m.Claim
	if f.claim == ClaimAuto {
		f.claim = ClaimFirst
		if f.autoInTx {
			f.claim = ClaimInTx
		}
	}
	switch m.Claim {
	case ClaimAuto, ClaimFirst:
	case ClaimInTx:
		switch {
		case m.Mode == ModeOff:
			errs = append(errs, fmt.Errorf("flow %q: option Idempotency sets Claim: ClaimInTx and Mode: ModeOff, which claims nothing; fix: keep one", f.name))
		case f.opts.Durable:
			errs = append(errs, fmt.Errorf("flow %q: option Idempotency.Claim is ClaimInTx, which is for flows that are not durable (a durable flow's run is created with its claim); fix: drop Claim (ClaimAuto)", f.name))
		case f.shape != shapeUnary:
			errs = append(errs, fmt.Errorf("flow %q: option Idempotency.Claim is ClaimInTx, which is for unary flows, and this one is a %s, which never stores a response; fix: drop Claim", f.name, f.shape))
		}
	default:
		errs = append(errs, fmt.Errorf("flow %q: option Idempotency.Claim %d is not a claim strategy; fix: use oke.ClaimAuto, oke.ClaimFirst or oke.ClaimInTx", f.name, m.Claim))
	}
	if m.Mode == ModeRequired {
		switch {
		case f.shape == shapeStream:
			errs = append(errs, fmt.Errorf("flow %q: option Idempotency is Required, but the flow is a stream, whose responses are never stored; fix: drop Required (use oke.Auto or oke.Off)", f.name))
		case f.shape == shapeLive:
			errs = append(errs, fmt.Errorf("flow %q: option Idempotency is Required, but the flow is a live SSE feed; fix: drop Required (use oke.Off)", f.name))
		case !f.qualifies() && f.inferred != nil:
			errs = append(errs, fmt.Errorf("flow %q: option Idempotency is Required, but its code's effects %v (inferred by oke extract) include no write, emit, send, call, fetch, ask, embed or raw, so it can never honor the header; fix: drop Required", f.name, f.inferred))
		case !f.qualifies():
			errs = append(errs, fmt.Errorf("flow %q: option Idempotency is Required, but its declared effects %v include no write, emit, send, call, fetch, ask, embed or raw; fix: drop Required, or declare the effect the flow has", f.name, f.opts.Effects))
		}
	}
	return errs
}

// qualifies reports whether the flow's effects include a non-read effect:
// its inferred effects when its generated contract is fresh (useContracts),
// else its declared ones; undeclared effects are assumed to.
func (f *flow) qualifies() bool {
	effects := f.opts.Effects
	if f.inferred != nil {
		effects = f.inferred // the generated contract's: what the code does
	}
	if effects == nil {
		return true
	}
	for _, e := range effects {
		if e.Qualifying() {
			return true
		}
	}
	return false
}

func (rt *route) check() error {
	f, b := rt.f, rt.b
	if b.badOpt != "" {
		return fmt.Errorf("flow %q: binding %s: %s is an option of oke.Cron bindings; fix: drop it", f.name, b, b.badOpt)
	}
	if b.sched != nil {
		return rt.checkSchedule()
	}
	if b.event != "" || b.intern {
		if f.shape != shapeUnary {
			return fmt.Errorf("flow %q: binding %s: only a flow made with oke.NewFlow runs as a journal run", f.name, b)
		}
		return nil
	}
	get := b.Method == http.MethodGet || b.Method == http.MethodHead
	if f.shape == shapeLive && !get {
		return fmt.Errorf("flow %q: binding %s: a live SSE feed must be bound with oke.GET", f.name, b)
	}
	if b.dedupeField != "" {
		if f.shape != shapeUnary {
			return fmt.Errorf("flow %q: binding %s: a webhook needs a flow made with oke.NewFlow", f.name, b)
		}
		ttl, err := idem.ParseTTL(b.dedupeTTL)
		if err != nil {
			return fmt.Errorf("flow %q: binding %s: dedupe TTL: %v; fix: e.g. DedupeTTL(\"7d\")", f.name, b, err)
		}
		rt.dedupeT = ttl
	}
	if f.opts.Idempotency.Mode == ModeRequired {
		switch {
		case get:
			return fmt.Errorf("flow %q: option Idempotency is Required, but binding %s is a GET, which never honors Idempotency-Key; fix: bind it with POST (or QUERY), or drop Required", f.name, b)
		case b.dedupeField != "":
			return fmt.Errorf("flow %q: option Idempotency is Required, but binding %s is a webhook, which ignores the header; fix: drop Required (the webhook dedupes on %q)", f.name, b, b.dedupeField)
		}
	}
	rt.honors = !get && b.dedupeField == "" && f.shape == shapeUnary && f.qualifies() && f.opts.Idempotency.Mode != ModeOff
	return nil
}

// Shutdown begins a graceful shutdown: live SSE feeds (NewLive) end now —
// their functions' contexts are cancelled — so that http.Server.Shutdown,
// which waits for every running request, need not wait for feeds that
// never end by themselves. Register it with the server:
//
//	srv.RegisterOnShutdown(app.Shutdown)
//
// Everything else keeps running until Close. Close calls it too; calling
// it more than once is fine.
func (a *App) Shutdown() { a.feedsEndOnce.Do(func() { close(a.feedsEnd) }) }

// Close stops background work and waits for in-flight requests, up to ctx.
// It does not close the driver. Stop your http.Server (Shutdown) first.
func (a *App) Close(ctx context.Context) error {
	if a.closing.Swap(true) {
		return nil
	}
	close(a.stop)
	a.sched.Stop()
	a.Shutdown()
	done := make(chan struct{})
	go func() {
		a.inflight.Wait()
		a.bg.Wait()
		a.sched.Wait()
		close(done)
	}()
	select {
	case <-done:
		a.cancel()
		a.leases.Close()
		a.stopHearing()
		return nil
	case <-ctx.Done():
		a.cancel() // cut running steps off; their runs are picked up again later
		go a.leases.Close()
		a.stopHearing()
		return fmt.Errorf("oke: close: %w", ctx.Err())
	}
}

// stopHearing stops the driver's HearWaiters, which Start began.
func (a *App) stopHearing() {
	if a.started.Load() && a.unhear != nil { // started is stored after unhear
		a.unhear()
	}
}

func (a *App) sweepLoop() {
	defer a.bg.Done()
	t := time.NewTicker(a.cfg.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-a.stop:
			return
		case <-t.C:
			select {
			case <-a.stop: // both were ready: closing wins, no batch after it
				return
			default:
			}
			if _, err := a.sweepPaced(context.Background()); err != nil {
				a.log.Error("oke: sweep expired idempotency rows", "err", err)
			}
		}
	}
}

// sweepBatch is how many rows one Sweep call of the driver deletes at most.
const sweepBatch = 1000

// DefaultSweepRate is Config.SweepRate's default: expired rows deleted per
// second by the background sweep at most.
const DefaultSweepRate = 10_000

// sweepDuty is how many times a batch's own duration the background sweep
// pauses after it, at least: the sweep holds the store a fifth of the time
// at most.
const sweepDuty = 4

// sweepPause is how long the background sweep waits after a batch that
// deleted n rows in took: long enough that the rate stays at most rate
// rows a second (none when rate is negative), and at least sweepDuty times
// took.
func sweepPause(n int, took time.Duration, rate int) time.Duration {
	pause := sweepDuty * took
	if rate > 0 {
		if budget := time.Duration(n) * time.Second / time.Duration(rate); budget-took > pause {
			pause = budget - took
		}
	}
	return pause
}

// sweepPaced is Sweep for the background: a pause after each full batch
// (sweepPause), ended early when the app closes.
func (a *App) sweepPaced(ctx context.Context) (int, error) {
	return a.sweep(ctx, func(n int, took time.Duration) bool {
		pause := sweepPause(n, took, a.cfg.SweepRate)
		if a.onSweepPause != nil {
			a.onSweepPause(pause)
		}
		t := time.NewTimer(pause)
		defer t.Stop()
		select {
		case <-t.C:
			return true
		case <-a.stop:
			return false
		}
	})
}

// Sweep deletes every expired idempotency row now, in batches, and returns
// how many it deleted.
func (a *App) Sweep(ctx context.Context) (int, error) { return a.sweep(ctx, nil) }

// sweep deletes expired rows in batches until one is not full. After each
// full batch (n rows in took), pause, unless nil, waits before the next and
// says whether to go on.
func (a *App) sweep(ctx context.Context, pause func(n int, took time.Duration) bool) (int, error) {
	total := 0
	for {
		start := time.Now()
		sctx, end := a.bound(ctx, "sweep")
		n, err := a.cfg.Driver.Sweep(sctx, sweepBatch)
		err = end(err)
		total += n
		if err != nil {
			return total, fmt.Errorf("sweep: %w", err)
		}
		if n < sweepBatch || (pause != nil && !pause(n, time.Since(start))) {
			return total, nil
		}
	}
}

// Subscribe calls fn for every event emitted by the app's flows (Fx.Emit),
// synchronously in the emitting flow: fn must not block. It returns a
// function that ends the subscription.
func (a *App) Subscribe(fn func(Event)) (cancel func()) {
	s := &subscriber{fn: fn}
	a.subsMu.Lock()
	defer a.subsMu.Unlock()
	var cur []*subscriber
	if p := a.subs.Load(); p != nil {
		cur = *p
	}
	next := append(append([]*subscriber(nil), cur...), s)
	a.subs.Store(&next)
	return func() {
		a.subsMu.Lock()
		defer a.subsMu.Unlock()
		cur := *a.subs.Load()
		next := make([]*subscriber, 0, len(cur))
		for _, x := range cur {
			if x != s {
				next = append(next, x)
			}
		}
		a.subs.Store(&next)
	}
}

type subscriber struct{ fn func(Event) }

func (a *App) publish(e Event) {
	if p := a.subs.Load(); p != nil {
		for _, s := range *p {
			s.fn(e)
		}
	}
}

func (a *App) httpClient() *http.Client {
	if a.cfg.HTTPClient != nil {
		return a.cfg.HTTPClient
	}
	return http.DefaultClient
}

func (a *App) secrets() Secrets {
	if a.cfg.Secrets != nil {
		return a.cfg.Secrets
	}
	return EnvSecrets{}
}

// FlowInfo describes one bound flow, for contracts and consoles.
type FlowInfo struct {
	Name        string   `json:"name"`
	Description string   `json:"description,omitempty"`
	Bindings    []string `json:"bindings"`
	Shape       string   `json:"shape"`
	Idempotency string   `json:"idempotency"`
	// Honored is true when at least one binding honors Idempotency-Key.
	Honored bool `json:"honored"`
	Durable bool `json:"durable,omitempty"`
	// Mode and TTL are the flow's Idempotency-Key mode ("auto",
	// "required", "off") and the effective TTL of its stored responses
	// (e.g. "24h"); Claim is how a keyed request claims its key ("first",
	// or "in_tx": held by the flow's transaction), empty for a flow that
	// never claims one (bound only with GET, routes that ignore the header,
	// events, schedules).
	Mode  string `json:"mode"`
	TTL   string `json:"ttl"`
	Claim string `json:"claim,omitempty"`
	// Coalesced: a durable flow whose keyed requests run every step in one
	// transaction, with one commit (its contract's coalesced, on a driver
	// that can: docs/durable.md); its Claim is then "in_tx".
	Coalesced bool `json:"coalesced,omitempty"`
	// Effects are what decides whether the header is honored: the
	// effects oke extract inferred from the flow's code when its generated
	// contract is fresh (EffectsFrom "contract"), else those declared in
	// Options.Effects ("declared"), else none ("undeclared": the flow is
	// assumed to write).
	Effects     []Effect `json:"effects,omitempty"`
	EffectsFrom string   `json:"effectsFrom"`
	// Contract is "fresh", "stale" or "missing": the flow's generated
	// contract against the flow as it runs; ContractProblem says what is
	// stale. Source is where extract found the flow (FILE:LINE).
	Contract        string `json:"contract"`
	ContractProblem string `json:"contractProblem,omitempty"`
	Source          string `json:"source,omitempty"`
	// Why gives, for each inferred effect, the call chains that led to it,
	// and Steps a durable flow's constant step names, from a fresh
	// contract.
	Why   map[Effect][]string `json:"why,omitempty"`
	Steps []string            `json:"steps,omitempty"`
}

// Flows describes the app's flows, sorted by name.
func (a *App) Flows() []FlowInfo {
	byName := map[string]*FlowInfo{}
	claims := map[string]bool{} // a route of the flow claims a key: the header's or a webhook's
	for _, rt := range a.routes {
		fi := byName[rt.f.name]
		if fi == nil {
			f := rt.f
			fi = &FlowInfo{Name: f.name, Description: f.opts.Description, Shape: f.shape.String(),
				Idempotency: f.opts.Idempotency.String(), Durable: f.opts.Durable,
				Mode: f.opts.Idempotency.Mode.String(), TTL: idem.FormatTTL(f.ttl), Claim: f.claim.String(),
				Effects: f.opts.Effects, EffectsFrom: "declared", Contract: f.contract, ContractProblem: f.contractProblem, Source: f.source,
				Coalesced: f.coalesced}
			if f.coalesced {
				fi.Claim = ClaimInTx.String()
			}
			switch {
			case f.inferred != nil:
				fi.Effects, fi.EffectsFrom = f.inferred, "contract"
				fi.Why, fi.Steps = f.why, f.steps
			case f.opts.Effects == nil:
				fi.EffectsFrom = "undeclared"
			}
			byName[f.name] = fi
		}
		fi.Bindings = append(fi.Bindings, rt.b.pattern(rt.f.name))
		fi.Honored = fi.Honored || rt.honors
		claims[rt.f.name] = claims[rt.f.name] || rt.honors || rt.dedupe != nil
	}
	out := make([]FlowInfo, 0, len(byName))
	for name, fi := range byName {
		if !claims[name] {
			fi.Claim = "" // no route of it claims a key (serve: 3.)
		}
		out = append(out, *fi)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

var errNotStarted = errors.New("oke: app failed its start-up check")
