package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
)

// Call sends in as JSON with method to path and decodes a 2xx JSON answer
// into Out. For GET and HEAD nothing is sent as a body: in must be the zero
// value (use struct{}{}), and parameters go in [Query] and [PathParam]. A 204,
// or any empty 2xx body, leaves Out at its zero value.
//
// The returned Meta is filled whenever a request was sent, errors included:
// Meta.IdempotencyKey is the key to reuse (with [Key]) if you retry the call
// yourself. A non-2xx answer is an [*Error].
//
// An error decoding a 2xx body means the server did the work: do not resend
// with a new key. Resend with Meta.IdempotencyKey to get the stored answer.
func Call[In, Out any](ctx context.Context, c *Client, method, path string, in In, opts ...CallOption) (Out, Meta, error) {
	var out Out
	var body []byte
	if method == http.MethodGet || method == http.MethodHead {
		if !reflect.ValueOf(&in).Elem().IsZero() {
			return out, Meta{}, fmt.Errorf("oke client: %s %s: a %s request has no body, but the input is not empty; pass parameters with client.Query or client.PathParam", method, path, method)
		}
	} else {
		b, err := json.Marshal(in)
		if err != nil {
			return out, Meta{}, fmt.Errorf("oke client: %s %s: encode request: %w", method, path, err)
		}
		body = b
	}
	r, err := c.prepare(method, path, body, opts)
	if err != nil {
		return out, Meta{}, err
	}
	resp, err := c.send(ctx, r)
	if err != nil {
		return out, resp.Meta, err
	}
	if len(bytes.TrimSpace(resp.Body)) == 0 {
		return out, resp.Meta, nil
	}
	if err := json.Unmarshal(resp.Body, &out); err != nil {
		return out, resp.Meta, fmt.Errorf("oke client: %s %s: %d answer: decode body: %w", r.method, r.path, resp.Status, err)
	}
	return out, resp.Meta, nil
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
