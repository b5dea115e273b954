package client

import "context"

// Call sends in as JSON with method to path and decodes a 2xx JSON answer
// into Out. For GET and HEAD nothing is sent as a body: in must be the zero
// value (use struct{}{}), and parameters go in [Query] and [PathParam]. A 204,
// or any empty 2xx body, leaves Out at its zero value — except a 204 that
// parks a durable run (Meta.Pending): that is an error matching
// [ErrPending], since the call's result is still to come (see [Wait]).
//
// The returned Meta is filled whenever a request was sent, errors included:
// Meta.IdempotencyKey is the key to reuse (with [Key]) if you retry the call
// yourself. A non-2xx answer is an [*Error].
//
// An error decoding a 2xx body means the server did the work: do not resend
// with a new key. Resend with Meta.IdempotencyKey to get the stored answer.
func Call[In, Out any](ctx context.Context, c *Client, method, path string, in In, opts ...CallOption) (Out, Meta, error) {
	return Invoke[In, Out](ctx, c, Operation{Method: method, Path: path}, in, opts...)
}

// Endpoint is a typed route of an API, declared once and called many times:
//
//	var CreateCharge = client.Endpoint[ChargeIn, Charge]{Method: "POST", Path: "/charges"}
//	var GetCharge = client.Endpoint[struct{}, Charge]{Method: "GET", Path: "/charges/{id}"}
//
//	ch, meta, err := CreateCharge.Call(ctx, c, ChargeIn{Amount: 1000, Currency: "usd"})
//	ch, _, err = GetCharge.Call(ctx, c, struct{}{}, client.PathParam("id", ch.ID))
//
// Path may hold {name} segments, filled by [PathParam] options.
type Endpoint[In, Out any] struct {
	Method string
	Path   string
}

// Call calls the endpoint: [Call] with e's method and path.
func (e Endpoint[In, Out]) Call(ctx context.Context, c *Client, in In, opts ...CallOption) (Out, Meta, error) {
	return Call[In, Out](ctx, c, e.Method, e.Path, in, opts...)
}
