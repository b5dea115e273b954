package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
)

// KeyRule says how a call's Idempotency-Key is chosen, from what the flow's
// contract says about the header. The code `oke gen client` writes sets it
// on every [Operation]; [Call] and [Endpoint] use KeyAuto.
type KeyRule uint8

const (
	// KeyAuto is the client's default: a fresh key for every call whose
	// method is not GET or HEAD, unless [Key] gives one or [NoKey] sends
	// none.
	KeyAuto KeyRule = iota
	// KeyRequired is a flow that requires the header (Idempotency:
	// Required): every call sends a key — a fresh one, or the one given
	// with [Key] — and [NoKey] fails the call before anything is sent,
	// with an error naming the flow that matches [ErrKeyMissing].
	KeyRequired
	// KeyIgnored is a binding that does not honor the header: a GET, a
	// flow that only reads, a stream, a live feed, or Idempotency: Off. No
	// key is sent, and [Key] fails the call before anything is sent: the
	// server would ignore the key, so it would protect nothing.
	KeyIgnored
)

func (k KeyRule) String() string {
	switch k {
	case KeyAuto:
		return "KeyAuto"
	case KeyRequired:
		return "KeyRequired"
	case KeyIgnored:
		return "KeyIgnored"
	}
	return "KeyRule(" + strconv.Itoa(int(k)) + ")"
}

// Operation is one route of an API together with what its flow's contract
// says about it. `oke gen client` writes one per generated method; by hand
// it is an [Endpoint] that also knows its flow's key rule:
//
//	var charge = client.Operation{Flow: "payments.charge", Method: "POST", Path: "/charges", Key: client.KeyRequired}
//	ch, meta, err := client.Invoke[ChargeIn, Charge](ctx, c, charge, in)
type Operation struct {
	// Flow is the flow's name, e.g. "payments.charge"; errors name it.
	Flow string
	// Method and Path are the route. Path may hold {name} segments, filled
	// by [PathParam] or [PathValue], a {name...} wildcard (its value may
	// hold slashes; each segment is escaped), and {$}, which is dropped.
	Method string
	Path   string
	// Key is the flow's Idempotency-Key rule.
	Key KeyRule
	// ReadOnly says the flow has no effect but reads: a call that carries
	// no key may still be retried (like a GET), since running it twice
	// changes nothing.
	ReadOnly bool
}

// Invoke calls op: it sends in as JSON and decodes a 2xx JSON answer into
// Out, like [Call], and applies op's key rule (see [KeyRule]). An answer that
// parks a durable run (204 with Oke-Run-Id) is an error matching
// [ErrPending] unless [Wait] waits for the final one. For GET and
// HEAD nothing is sent as a body: in must be the zero value (the generated
// code passes struct{}{} and puts the input's fields in the path and the
// query).
func Invoke[In, Out any](ctx context.Context, c *Client, op Operation, in In, opts ...CallOption) (Out, Meta, error) {
	var out Out
	r, err := c.prepareInput(op, in, opts, false)
	if err != nil {
		return out, Meta{}, err
	}
	resp, err := c.send(ctx, r)
	if err != nil {
		return out, resp.Meta, err
	}
	if resp.Pending {
		return out, resp.Meta, r.pendingError(resp.Meta)
	}
	if err := decodeBody(resp.Body, &out); err != nil {
		return out, resp.Meta, fmt.Errorf("oke client: %s%s %s: %d answer: decode body: %w", r.prefix(), r.method, r.path, resp.Status, err)
	}
	return out, resp.Meta, nil
}

// Stream calls op and returns the answer as it arrives: for a flow that
// streams its body (NDJSON, a file) or a live feed of server-sent events.
// On a 2xx the *http.Response comes back with its body unread: read it,
// and close it. Canceling ctx ends the read.
//
// Everything before the body is as for [Invoke]: the key rule, retries of
// network errors and of retryable answers (with retries configured), and a
// non-2xx answer, read whole and returned as an [*Error] (the returned
// *http.Response is then nil). Meta describes the last attempt.
func Stream[In any](ctx context.Context, c *Client, op Operation, in In, opts ...CallOption) (*http.Response, Meta, error) {
	r, err := c.prepareInput(op, in, opts, true)
	if err != nil {
		return nil, Meta{}, err
	}
	resp, err := c.send(ctx, r)
	if err != nil {
		return nil, resp.Meta, err
	}
	return resp.raw, resp.Meta, nil
}

// prepareInput encodes in (unless the method has no body) and prepares the
// call.
func (c *Client) prepareInput(op Operation, in any, opts []CallOption, stream bool) (*request, error) {
	var body []byte
	if op.Method == http.MethodGet || op.Method == http.MethodHead {
		if v := reflect.ValueOf(in); v.IsValid() && !v.IsZero() {
			return nil, fmt.Errorf("oke client: %s%s %s: a %s request has no body, but the input is not empty; pass parameters with client.Query or client.PathParam",
				flowPrefix(op.Flow), op.Method, op.Path, op.Method)
		}
	} else {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, fmt.Errorf("oke client: %s%s %s: encode request: %w", flowPrefix(op.Flow), op.Method, op.Path, err)
		}
		body = b
	}
	return c.prepare(op, body, opts, stream)
}

// decodeBody decodes a 2xx body into out; an empty body leaves it zero.
func decodeBody(body []byte, out any) error {
	for _, b := range body {
		switch b {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return json.Unmarshal(body, out)
	}
	return nil
}

func flowPrefix(flow string) string {
	if flow == "" {
		return ""
	}
	return flow + ": "
}

// PathValue fills the segment {name} of the call's path with v, a string,
// bool, integer or floating-point value (or a named type of one, or a
// non-nil pointer to one), written as oke reads it back into the input's
// field: strconv's formatting, then escaped like [PathParam]. A nil
// pointer or another kind fails the call before sending.
func PathValue(name string, v any) CallOption {
	return func(cc *callConfig) {
		s, ok, err := formatParam(v)
		switch {
		case err != nil:
			cc.errs = append(cc.errs, fmt.Errorf("oke client: path parameter {%s}: %w", name, err))
		case !ok:
			cc.errs = append(cc.errs, fmt.Errorf("oke client: path parameter {%s} is a nil pointer: set it (the path needs a value)", name))
		default:
			PathParam(name, s)(cc)
		}
	}
}

// QueryValue adds name=v to the query, formatted like [PathValue], unless v
// is the zero value of its type or a nil pointer: oke fills an input's
// field only from the parameters a URL has, so a zero value need not be
// sent. A non-nil pointer to a zero value is sent.
func QueryValue(name string, v any) CallOption {
	return func(cc *callConfig) {
		rv := reflect.ValueOf(v)
		if !rv.IsValid() || rv.IsZero() {
			return
		}
		s, ok, err := formatParam(v)
		if err != nil {
			cc.errs = append(cc.errs, fmt.Errorf("oke client: query parameter %s: %w", name, err))
			return
		}
		if ok {
			Query(url.Values{name: {s}})(cc)
		}
	}
}

// formatParam writes a scalar as oke's decoder parses it (strconv); ok is
// false for a nil pointer.
func formatParam(v any) (s string, ok bool, err error) {
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return "", false, nil
		}
		rv = rv.Elem()
	}
	switch rv.Kind() {
	case reflect.String:
		return rv.String(), true, nil
	case reflect.Bool:
		return strconv.FormatBool(rv.Bool()), true, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(rv.Int(), 10), true, nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return strconv.FormatUint(rv.Uint(), 10), true, nil
	case reflect.Float32:
		return strconv.FormatFloat(rv.Float(), 'g', -1, 32), true, nil
	case reflect.Float64:
		return strconv.FormatFloat(rv.Float(), 'g', -1, 64), true, nil
	}
	return "", false, fmt.Errorf("a %T cannot be written in a URL; want a string, bool, integer or float", v)
}
