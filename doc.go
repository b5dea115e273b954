// Package oke makes HTTP handlers that change the world — charge a card, send
// an email, write a row — happen once, however often clients retry.
//
// A handler is a flow: a named function with a typed input and output that
// performs its effects through an effect handle, Fx. Bind flows to HTTP
// routes on an App, which is an http.Handler:
//
//	type ChargeIn struct {
//		Amount   int64  `json:"amount" minimum:"1"`           // required: not a pointer, no omitempty
//		Currency string `json:"currency" enum:"usd,eur,gbp"` // checked by the decoder (400 ValidationFailed)
//	}
//
//	var Charge = oke.NewFlow("payments.charge", oke.Options{Idempotency: oke.Required},
//		func(ctx context.Context, in ChargeIn, fx *oke.Fx) (oke.Response[Charge], error) {
//			var c Charge
//			err := fx.Store(db).QueryRow(ctx,
//				`INSERT INTO charges (amount, currency) VALUES ($1, $2) RETURNING id, amount, currency`,
//				in.Amount, in.Currency).Scan(&c.ID, &c.Amount, &c.Currency)
//			if err != nil {
//				return oke.Response[Charge]{}, err
//			}
//			return oke.Created(c, "/charges/"+c.ID), nil
//		})
//
//	drv, err := file.Open(".oke") // rows in .oke/idempotency.json
//	...
//	app := oke.New(oke.Config{Driver: drv, Gate: gate})
//	app.Handle(oke.POST("/charges"), Charge)
//	if err := app.Start(ctx); err != nil {
//		log.Fatal(err) // a bad option names the flow and the fix
//	}
//	log.Fatal(http.ListenAndServe(":8080", app))
//
// # Idempotency-Key
//
// A client sends an Idempotency-Key header (16–255 printable ASCII
// characters) with a mutating call, and the same key on every retry of that
// call. The first request with a key claims it and runs the flow; the
// response is stored, and a retry gets the stored status, body, Content-Type
// and Location back with Idempotent-Replayed: true. A retry while the first
// is still running gets 409 IdempotencyInProgress with Retry-After; the same
// key with a different payload gets 422 IdempotencyKeyReused.
//
// The header is honored when the request is HTTP with a method other than
// GET (QUERY counts; so does the RPC binding), the flow has a non-read
// effect (write, emit, send, call, fetch, ask, embed or raw), the flow is
// not a stream or live feed, and its mode is not Off. Otherwise the header
// is ignored. In-process calls (Call) have no request and never honor it.
//
// What a flow does is read from its code: `oke extract` (run it with go
// generate) infers every flow's effects, transitively, checks its options
// (an unparseable TTL, Required on a flow that cannot honor the header, and
// more fail it, naming the flow and the fix), and writes the flow's
// contract, an OpenAPI document, and a Go file that registers the contract
// with the app (RegisterContract). A flow whose contract is missing or
// stale is logged at Start and falls back to Options.Effects (undeclared:
// assumed to write).
//
// How a keyed request claims its key is Idempotency.Claim: ClaimFirst (a
// row with a lease, before the function runs), or ClaimInTx (held by the
// flow's transaction, one commit per request, on driver/postgres);
// ClaimAuto, the default, picks ClaimInTx when the contract shows that
// every non-read effect of the flow is a statement in Fx.Tx. Every strategy
// answers by the same table. A request whose key is in progress may send
// "Prefer: wait=N" to be held until the first request's stored answer
// instead of getting 409.
//
// The scope of a key is tenant + principal + flow, from the Gate. The
// fingerprint of a request is a SHA-256 of the flow name and the decoded,
// validated input re-encoded as JSON, so key order and whitespace in the
// body do not matter. Order of checks: gate (401/403), input (400), key
// (400), claim — a request refused before the claim stores nothing.
//
// # Failures and crashes
//
// A failure before any non-read effect deletes the row, so the same key may
// run again. A failure after one stores 500 InternalError (a new key is
// needed); a declared failure (Fx.Fail) is stored as itself. A response that
// is not a buffered JSON envelope (a stream, a live feed, a Raw response of
// another content type) is delivered live and its row deleted.
//
// A claim holds a lease (30 s by default), renewed while the flow runs. The
// flow's context is not cancelled when the client disconnects, and the
// response is stored before it is sent. If the process dies, the lease
// lapses and the next request with the key runs the flow again: a
// non-durable flow is at-least-once across crashes. If the store cannot be
// read or written, the request fails closed with 503 StoreUnavailable and
// the flow does not run; once the flow has started, a store failure answers
// 503 OutcomeUnknown ("the request may have run; retry with the same
// Idempotency-Key"), never a live answer that no retry could replay.
//
// Drivers store the rows: driver/memory for tests, driver/file (the embedded
// default, a crash-safe append-only file) and driver/postgres (production,
// and several app instances on one database). They all pass the same
// conformance suite, driver/drivertest.
//
// # Durable flows
//
// With Options.Durable a flow runs as a journal run: Step saves each step's
// result, so after a crash the run picks up where it stopped, and a retried
// request with the same key resumes the run instead of starting it again.
// Sleep parks a run durably (the request gets 204), Claim lets one run of
// many claim a business key, Run and Fx.Emit (with OnEvent bindings) start
// other runs — exactly once when called inside a step — and App.Replay
// starts a run afresh. The app's scheduler recovers runs whose lease lapsed,
// wakes sleeping runs and retries runs whose step could not be saved.
//
//	var Refund = oke.NewFlow("payments.refund", oke.Options{Durable: true},
//		func(ctx context.Context, in RefundIn, fx *oke.Fx) (oke.Response[Refund], error) {
//			id, err := oke.NewID(ctx, "refund id") // the same on every pick-up
//			if err != nil {
//				return oke.Response[Refund]{}, err
//			}
//			_, err = oke.Step(ctx, "provider refund", func(ctx context.Context) (string, error) {
//				return refundAtProvider(ctx, fx, id) // fx.Fetch sends oke.StepKey(ctx) as Idempotency-Key
//			})
//			...
//		})
//
// A step whose function returns a plain error runs again by its RetryPolicy
// (the step's own, oke.Retry(p); else the flow's Options.Retry; else
// DefaultRetryPolicy: 3 attempts, ~200 ms then ~400 ms apart): short waits
// in process, longer ones parked in the journal. A declared failure is
// never retried. A run whose pick-ups keep failing (crashes, store
// failures; Config.DeadLetterAfter) is dead-lettered until App.Resume.
// See docs/durable.md, "Retries and dead letters".
//
// # Schedules
//
// Cron binds a flow to a schedule: a journal run of the flow at each tick,
// once per tick across every instance that shares the store (the run's
// dedupe key is the flow and the tick), with a catch-up policy after
// downtime (CatchUpLatest, CatchUpAll, CatchUpSkip). The flow's input is
// the Tick it serves. App.Schedules lists them; so do the admin API, the
// console and `oke schedules`.
//
//	app.Handle(oke.Cron("0 3 * * *").In(paris), NightlySweep)
//
// # Effects
//
// Fx records every effect as it happens: Store wraps database/sql and
// classifies each statement by what it does (ClassifySQL: an INSERT …
// RETURNING sent with QueryRow is a write); Emit, Send, Fetch, Ask, Embed,
// Raw and Call are non-read effects; Secret is read-only. The record decides
// what a failure means for the key, as above.
package oke
