// Package client is the typed Go client for oke HTTP APIs. It speaks only the
// HTTP contract (JSON bodies, the error envelope, the Idempotency-Key
// headers), so it works against any oke app, in this process or across the
// network, and imports nothing else from oke.
//
// # Calling
//
// Make one [Client] per API and share it:
//
//	c, err := client.New("https://api.example.com",
//		client.WithHeader("Authorization", "Bearer user:42"),
//		client.WithHeader("X-Tenant", "acme"),
//		client.WithRetry(client.Retry{MaxAttempts: 5}),
//	)
//
// [Call] encodes the input as JSON and decodes a 2xx JSON answer into the
// output type. An [Endpoint] names a route once, with its types:
//
//	var CreateCharge = client.Endpoint[ChargeIn, Charge]{Method: "POST", Path: "/charges"}
//	var GetCharge = client.Endpoint[struct{}, Charge]{Method: "GET", Path: "/charges/{id}"}
//
//	ch, meta, err := CreateCharge.Call(ctx, c, ChargeIn{Amount: 1000, Currency: "usd"})
//	// meta.Status == 201, meta.Location == "/charges/ch_1"
//	got, _, err := GetCharge.Call(ctx, c, struct{}{}, client.PathParam("id", ch.ID))
//
// GET and HEAD carry no body: pass struct{}{} as the input, and parameters
// with [Query] and [PathParam]. [Client.Do] is the untyped layer beneath:
// bytes in, status, headers and bytes out.
//
// # Generated clients
//
// `oke gen client` writes a package with one method per route of an app's
// flows, with copies of the flows' input and output types, so that it
// imports only this package and the standard library (-import-types uses
// the app's own types instead; docs/client.md):
//
//	api, err := paymentsclient.New("http://127.0.0.1:8080", client.WithRetry(client.Retry{MaxAttempts: 5}))
//	ch, meta, err := api.Payments.Charge(ctx, paymentsclient.ChargeIn{Amount: 1000, Currency: "usd"})
//	got, _, err := api.Payments.Get(ctx, paymentsclient.GetIn{ID: ch.ID})
//
// Each method is an [Operation] — the route, and the flow's key rule from
// its contract ([KeyRequired], [KeyAuto], [KeyIgnored]) — called with
// [Invoke], or [Stream] for a streamed body or a live feed.
//
// # Idempotency keys: one per logical call
//
// Every call whose method is not GET or HEAD (POST, PUT, PATCH, DELETE,
// QUERY, …) carries an Idempotency-Key header. The client mints a fresh random
// key for each call to [Call], [Endpoint.Call] or [Client.Do], and sends that
// same key on every retry of that call. A server that honours the key runs
// the work once; a retry gets the stored answer, marked with the header
// Idempotent-Replayed: true, which the client reports as
// [Meta].IdempotentReplayed.
//
// Two calls are two keys. When one logical action spans several calls of
// yours — a checkout button pressed twice, a job retried by your queue — mint
// the key once ([NewKey], or your own 16–255 printable ASCII characters such
// as "checkout-attempt-9f3a2c"), keep it, and pass it with [Key]:
//
//	key := client.NewKey() // stored with the checkout attempt
//	ch, meta, err := CreateCharge.Call(ctx, c, in, client.Key(key))
//
// A key that breaks the rule fails the call before anything is sent, with an
// error matching [ErrKeyInvalid]. [NoKey] sends no key at all.
//
// # Retries
//
// Retries are off by default: one attempt per call. [WithRetry] turns them
// on. The client then retries, always with the call's one key and the same
// body bytes:
//
//   - 409 IdempotencyInProgress — the first call with this key is still
//     running — asking the server to hold the retry until that call
//     finishes (Prefer: wait=N, below), or after the server's Retry-After
//     when it does not hold requests;
//   - network errors, where no answer arrived;
//   - 5xx answers, unless the answer was a replay (a stored 500 stays 500).
//
// It never retries 422 IdempotencyKeyReused or any other 4xx: the same
// request would get the same answer. Without a key it never retries POST or
// PATCH, since nothing would stop the work from running twice.
//
// The wait before each retry is jittered exponential backoff (BaseDelay
// doubling up to MaxDelay, drawn from the upper half of that range), and at
// least the Retry-After the server asked for, even past MaxDelay. The call's
// context bounds it all: when ctx ends the call stops at once, and a wait
// that would outlast ctx's deadline is not begun. The error then wraps both
// the context's error and the last attempt's error:
//
//	errors.Is(err, context.DeadlineExceeded) // true
//	errors.Is(err, client.ErrInProgress)     // true if the last answer was that 409
//
// # Waiting on the server: Prefer: wait=N
//
// Retry-After on a 409 IdempotencyInProgress is a guess: the flow's recent
// duration on that server, at most the time left on the first call's lease
// (up to 30 s), not when that call ends. So the retry of a
// 409 goes out after the backoff only, with Prefer: wait=N (RFC 7240): a
// server that supports it holds the request until the first call finishes
// and answers its stored response (Idempotent-Replayed: true), or answers
// 409 again after N seconds; either way with Preference-Applied: wait=N,
// which the client reports as [Meta].Waited. A server that does not hold
// (or holds as many requests as it allows already) answers 409 at once
// without Preference-Applied, and the client then waits
// its Retry-After. N is [Retry].PreferWait (default and most 60 s), kept a
// second inside ctx's deadline and the http.Client's Timeout; a negative
// PreferWait sends no Prefer at all.
//
// Meta.Attempts counts the attempts. (net/http's Transport may, on its own,
// resend a request carrying an Idempotency-Key when a reused keep-alive
// connection drops before any answer; that resend has the same key and body
// and is not counted.)
//
// # Errors
//
// A non-2xx answer is an [*Error] with the status, the envelope's Code and
// Message ({"error":{"code":…,"message":…}}), Retry-After and the Meta. A
// body that is not the envelope still gives an *Error, with an excerpt of the
// body as its Message. The four idempotency codes have sentinels for
// errors.Is:
//
//	switch {
//	case errors.Is(err, client.ErrKeyReused): // 422: payload changed; mint a new key
//	case errors.Is(err, client.ErrInProgress): // 409: still running; retry later, same key
//	case errors.Is(err, client.ErrKeyMissing): // 400: the flow requires a key
//	case errors.Is(err, client.ErrKeyInvalid): // 400, or rejected before sending
//	}
//
// [Error.Retryable] says whether the same call, same key, may yet succeed.
// After a network error or a timeout the outcome is unknown: the server may
// have done the work. Resend with the same key (Meta.IdempotencyKey) to find
// out; never with a new one.
package client
