// Package oke is a stub of github.com/okengine/oke for the analyzers'
// tests: the API the analyzers recognize, with no behaviour. The types of
// net/http and database/sql in its signatures are stand-ins declared here,
// so that every test does not type-check those packages from source; the
// tests of cmd/oke-vet and internal/cli run the analyzers on the real oke.
package oke

import (
	"context"
	"time"
)

// Stand-ins for net/http and database/sql.
type (
	Request   struct{}
	Response_ struct{}
	Client    struct{}
	Result    interface{}
	Rows      struct{}
	Row       struct{}
	TxOptions struct{}
)

func (c *Client) Do(req *Request) (*Response_, error) { return nil, nil }
func (r *Row) Scan(dest ...any) error                 { return nil }
func (r *Row) Err() error                             { return nil }

type Effect string

type Options struct {
	Effects     []Effect
	Durable     bool
	Timeout     time.Duration
	Description string
}

type Response[T any] struct {
	Status int
	Body   T
}

func OK[T any](v T) Response[T]                       { return Response[T]{Body: v} }
func Created[T any](v T, location string) Response[T] { return Response[T]{Body: v} }

type Flow[In, Out any] struct{ name string }

func NewFlow[In, Out any](name string, opts Options, do func(ctx context.Context, in In, fx *Fx) (Response[Out], error)) *Flow[In, Out] {
	return &Flow[In, Out]{name: name}
}

type Message struct{ To, Body string }
type AskRequest struct{ Prompt string }
type AskResponse struct{ Text string }
type EmitOption func()

type Fx struct{}

func (fx *Fx) Emit(ctx context.Context, name string, payload any, opts ...EmitOption) error {
	return nil
}
func (fx *Fx) Send(ctx context.Context, m Message) error { return nil }
func (fx *Fx) Fetch(req *Request) (*Response_, error)    { return nil, nil }
func (fx *Fx) HTTPClient() *Client                       { return nil }
func (fx *Fx) Ask(ctx context.Context, req AskRequest) (AskResponse, error) {
	return AskResponse{}, nil
}
func (fx *Fx) Embed(ctx context.Context, texts []string) ([][]float32, error) { return nil, nil }
func (fx *Fx) Raw(ctx context.Context, what string, fn func(ctx context.Context) error) error {
	return nil
}
func (fx *Fx) Secret(ctx context.Context, name string) (string, error) { return "", nil }
func (fx *Fx) Fail(status int, code, message string) error             { return nil }
func (fx *Fx) Store(db DB) *Store                                      { return &Store{} }
func (fx *Fx) Tx(ctx context.Context) (*Tx, error)                     { return &Tx{}, nil }

type DB interface{}

type Store struct{}

func (s *Store) Exec(ctx context.Context, query string, args ...any) (Result, error) {
	return nil, nil
}
func (s *Store) Query(ctx context.Context, query string, args ...any) (*Rows, error) {
	return nil, nil
}
func (s *Store) QueryRow(ctx context.Context, query string, args ...any) *Row { return nil }
func (s *Store) Tx(ctx context.Context, opts *TxOptions, fn func(tx *Tx) error) error {
	return nil
}

type Tx struct{}

func (t *Tx) Exec(ctx context.Context, query string, args ...any) (Result, error) {
	return nil, nil
}
func (t *Tx) QueryRow(ctx context.Context, query string, args ...any) *Row { return nil }

func Step[T any](ctx context.Context, name string, fn func(ctx context.Context) (T, error)) (T, error) {
	return fn(ctx)
}
func Sleep(ctx context.Context, name string, d time.Duration) error { return nil }

type SignalOption func()

func (fx *Fx) Signal(ctx context.Context, runID, name string, payload any, opts ...SignalOption) error {
	return nil
}
func AwaitSignal[T any](ctx context.Context, name string, timeout time.Duration) (T, bool, error) {
	var v T
	return v, false, nil
}
func SleepUntil(ctx context.Context, name string, t time.Time) error { return nil }
func NewID(ctx context.Context, name string) (string, error)         { return "", nil }
func Claim(ctx context.Context, key string) (bool, error)            { return true, nil }
func StepKey(ctx context.Context) string                             { return "" }
func Run[In, Out any](ctx context.Context, fx *Fx, f *Flow[In, Out], in In) (string, error) {
	return "", nil
}
func Call[In, Out any](ctx context.Context, fx *Fx, f *Flow[In, Out], in In) (Out, error) {
	var o Out
	return o, nil
}
