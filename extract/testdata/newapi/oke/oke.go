// Package oke is a stand-in for the oke package with the Idempotency
// option in its planned form ({Mode, TTL, Claim}), so that extract's tests
// read both forms. Only the declarations extract reads are here.
package oke

import (
	"context"
	"database/sql"
)

type Mode int

const (
	ModeAuto Mode = iota
	ModeRequired
	ModeOff
)

type ClaimStrategy int

const (
	ClaimAuto ClaimStrategy = iota
	ClaimFirst
	ClaimInTx
)

type Idempotency struct {
	Mode  Mode
	TTL   string
	Claim ClaimStrategy
}

var (
	Auto     = Idempotency{}
	Required = Idempotency{Mode: ModeRequired}
	Off      = Idempotency{Mode: ModeOff}
)

type Effect string

const (
	EffectRead  Effect = "read"
	EffectWrite Effect = "write"
	EffectEmit  Effect = "emit"
)

type Options struct {
	Idempotency Idempotency
	Effects     []Effect
	Durable     bool
	Description string
}

type Fx struct{}

type Tx struct{}

func (fx *Fx) Tx(ctx context.Context) (*Tx, error) { return nil, nil }

func (t *Tx) Exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return nil, nil
}

func (fx *Fx) Emit(ctx context.Context, name string, payload any) error { return nil }

type Response[T any] struct {
	Status int
	Body   T
}

func OK[T any](v T) Response[T] { return Response[T]{Body: v} }

type Handler interface{ Name() string }

type Flow[In, Out any] struct{ name string }

func (f *Flow[In, Out]) Name() string { return f.name }

func NewFlow[In, Out any](name string, opts Options, do func(context.Context, In, *Fx) (Response[Out], error)) *Flow[In, Out] {
	return &Flow[In, Out]{name: name}
}

type Binding struct{ Method, Path string }

func POST(path string) Binding { return Binding{Method: "POST", Path: path} }

type App struct{}

func (a *App) Handle(b Binding, h Handler) {}
