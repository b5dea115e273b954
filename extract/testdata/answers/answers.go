// Package answers holds flows about what an operation answers.
package answers

import (
	"context"
	"net/http"
	"time"

	"github.com/okengine/oke"
)

// This file's flows are about what an operation answers: the statuses the
// OpenAPI document lists for them, and no others.

// ErrGone is a declared failure kept in a package variable.
var ErrGone = oke.Fail(http.StatusGone, "ItemGone", "The item is gone.")

// In is the flows' input.
type In struct {
	ID string `json:"id"`
}

// Out is their output.
type Out struct {
	N int `json:"n"`
}

// ReadOnly only reads.
var ReadOnly = oke.NewFlow("answers.readOnly", oke.Options{Effects: []oke.Effect{oke.EffectRead}},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		return oke.OK(Out{}), nil
	})

// Answers is a server whose handler is bound as a method value.
type Answers struct{}

// create answers 201 or fails; its defer adds no answer.
func (a *Answers) create(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
	t := time.NewTimer(time.Millisecond)
	defer t.Stop()
	if in.ID == "" {
		return oke.Response[Out]{}, fx.Fail(http.StatusConflict, "AlreadyDone", "Done already.")
	}
	if err := fx.Emit(ctx, "created", in); err != nil {
		return oke.Response[Out]{}, err
	}
	return oke.Created(Out{}, "/answers/1"), nil
}

// Created is a method value with a defer: 201 only.
func (a *Answers) Created() *oke.Flow[In, Out] {
	return oke.NewFlow("answers.created", oke.Options{}, a.create)
}

// OnlyFails never succeeds: its failures are declared, through a helper, a
// package variable and oke's own.
var OnlyFails = oke.NewFlow("answers.onlyFails", oke.Options{},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[struct{}], error) {
		if err := fx.Emit(ctx, "tried", in); err != nil {
			return oke.Response[struct{}]{}, err
		}
		return oke.Response[struct{}]{}, fail(in.ID)
	})

func fail(id string) error {
	switch id {
	case "gone":
		return ErrGone.WithMessage("Item %q is gone.", id)
	case "none":
		return oke.ErrNotFound
	}
	return oke.Fail(http.StatusPaymentRequired, "PaymentDeclined", "Declined.")
}

// BindAnswers binds the flows above; one only when asked.
func BindAnswers(app *oke.App, a *Answers, extra bool) {
	app.Handle(oke.POST("/answers"), a.Created())
	app.Handle(oke.POST("/only-fails"), OnlyFails)
	if extra {
		app.Handle(oke.POST("/extra"), ReadOnly)
	}
}

// Lenient takes unknown fields (Options.AllowUnknownFields).
var Lenient = oke.NewFlow("answers.lenient", oke.Options{AllowUnknownFields: true},
	func(ctx context.Context, in LenientIn, fx *oke.Fx) (oke.Response[Out], error) {
		return oke.OK(Out{}), fx.Emit(ctx, "lenient", in)
	})

// LenientIn has a nested object.
type LenientIn struct {
	Kind  string `json:"kind"`
	Inner In     `json:"inner"`
}

// BindLenient binds Lenient.
func BindLenient(app *oke.App) { app.Handle(oke.POST("/lenient"), Lenient) }
