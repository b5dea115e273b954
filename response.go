package oke

import (
	"fmt"
	"net/http"

	"github.com/okengine/oke/internal/httpx"
)

// Response is what a flow returns: a status, a body encoded as JSON, and
// optionally a Location. Only status, body, Content-Type and Location are
// stored and replayed under an Idempotency-Key; Header is sent on the live
// response only (never replay Set-Cookie or auth headers).
type Response[T any] struct {
	Status   int // zero means 200
	Body     T
	Location string
	Header   http.Header

	raw       []byte
	rawType   string
	noContent bool
}

// OK answers 200 with v as JSON.
func OK[T any](v T) Response[T] { return Response[T]{Status: http.StatusOK, Body: v} }

// Created answers 201 with v as JSON and a Location.
func Created[T any](v T, location string) Response[T] {
	return Response[T]{Status: http.StatusCreated, Body: v, Location: location}
}

// Accepted answers 202 with v as JSON.
func Accepted[T any](v T) Response[T] { return Response[T]{Status: http.StatusAccepted, Body: v} }

// NoContent answers 204 with no body.
func NoContent[T any]() Response[T] {
	return Response[T]{Status: http.StatusNoContent, noContent: true}
}

// RawResponse answers with a body the flow encoded itself (not to be confused
// with Fx.Raw, an effect). A JSON content type
// (application/json or a +json type) is a buffered JSON envelope and is
// stored like any response; any other content type is sent live and not
// stored — under an Idempotency-Key its row is deleted, so the same key may
// run the flow again.
func RawResponse[T any](status int, contentType string, body []byte) Response[T] {
	return Response[T]{Status: status, raw: body, rawType: contentType}
}

func (r Response[T]) result() (result, error) {
	res := result{status: r.Status, location: r.Location, header: r.Header, storable: true}
	if res.status == 0 {
		res.status = http.StatusOK
	}
	switch {
	case r.noContent || res.status == http.StatusNoContent:
		res.status = http.StatusNoContent
	case r.raw != nil || r.rawType != "":
		res.body = r.raw
		res.contentType = r.rawType
		res.storable = isJSONType(r.rawType)
	default:
		b, err := marshalJSON(r.Body)
		if err != nil {
			return result{}, fmt.Errorf("encode response body: %w", err)
		}
		res.body = b
		res.contentType = "application/json"
	}
	return res, nil
}

// marshalJSON encodes v like json.Marshal but without escaping <, >, & and
// with a trailing newline.
func marshalJSON(v any) ([]byte, error) { return httpx.Marshal(v) }

func isJSONType(ct string) bool { return httpx.IsJSON(ct) }
