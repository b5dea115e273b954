package oke_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/okengine/oke"
)

type noIn struct{}

func unary(name string, opts oke.Options) *oke.Flow[noIn, string] {
	return oke.NewFlow(name, opts, func(context.Context, noIn, *oke.Fx) (oke.Response[string], error) {
		return oke.OK("ok"), nil
	})
}

// TestStartRefusesABadContract: the start-up checks (extract at app start)
// name the flow, the option and the fix.
func TestStartRefusesABadContract(t *testing.T) {
	stream := oke.NewStream("s.stream", oke.Options{Idempotency: oke.Required},
		func(context.Context, noIn, *oke.Fx, http.ResponseWriter) error { return nil })
	live := oke.NewLive("s.live", oke.Options{Idempotency: oke.Required},
		func(context.Context, noIn, *oke.Fx, func(oke.Event) error) error { return nil })
	for _, c := range []struct {
		name string
		bind func(app *oke.App)
		want []string // substrings of the error
	}{
		{"unparseable TTL", func(app *oke.App) {
			app.Handle(oke.POST("/x"), unary("f.ttl", oke.Options{Idempotency: oke.Idempotency{TTL: "1 hour"}}))
		}, []string{`flow "f.ttl"`, "Idempotency.TTL", `"1 hour"`, `e.g. TTL: "24h"`}},
		{"zero TTL", func(app *oke.App) {
			app.Handle(oke.POST("/x"), unary("f.zero", oke.Options{Idempotency: oke.Idempotency{TTL: "0s"}}))
		}, []string{`flow "f.zero"`, "positive integer"}},
		{"required on GET", func(app *oke.App) {
			app.Handle(oke.GET("/x"), unary("f.get", oke.Options{Idempotency: oke.Required}))
		}, []string{`flow "f.get"`, "Required", "GET", "fix:"}},
		{"required on a stream", func(app *oke.App) {
			app.Handle(oke.POST("/x"), stream)
		}, []string{`flow "s.stream"`, "Required", "stream", "fix:"}},
		{"required on a live feed", func(app *oke.App) {
			app.Handle(oke.GET("/x"), live)
		}, []string{`flow "s.live"`, "Required", "live", "fix:"}},
		{"required with only reads declared", func(app *oke.App) {
			app.Handle(oke.POST("/x"), unary("f.read", oke.Options{Idempotency: oke.Required, Effects: []oke.Effect{oke.EffectRead, oke.EffectSecrets}}))
		}, []string{`flow "f.read"`, "Required", "declared effects", "fix:"}},
		{"a mode that is none of the three", func(app *oke.App) {
			app.Handle(oke.POST("/x"), unary("f.mode", oke.Options{Idempotency: oke.Idempotency{Mode: 7}}))
		}, []string{`flow "f.mode"`, "not a mode", "fix: use oke.ModeAuto"}},
		{"a claim strategy that is none of the three", func(app *oke.App) {
			app.Handle(oke.POST("/x"), unary("f.claim", oke.Options{Idempotency: oke.Idempotency{Claim: 9}}))
		}, []string{`flow "f.claim"`, "not a claim strategy", "fix: use oke.ClaimAuto"}},
		{"required on a webhook", func(app *oke.App) {
			app.Handle(oke.Webhook("/x", "id"), unary("f.hook", oke.Options{Idempotency: oke.Required}))
		}, []string{`flow "f.hook"`, "webhook", "fix:"}},
		{"claim in transaction on a stream", func(app *oke.App) {
			app.Handle(oke.POST("/x"), oke.NewStream("s.tstream", oke.Options{Idempotency: oke.Idempotency{Claim: oke.ClaimInTx}},
				func(context.Context, noIn, *oke.Fx, http.ResponseWriter) error { return nil }))
		}, []string{`flow "s.tstream"`, "ClaimInTx", "stream", "fix: drop Claim"}},
		{"claim in transaction on a durable flow", func(app *oke.App) {
			app.Handle(oke.POST("/x"), unary("f.tdur", oke.Options{Durable: true, Idempotency: oke.Idempotency{Claim: oke.ClaimInTx}}))
		}, []string{`flow "f.tdur"`, "ClaimInTx", "not durable", "fix: drop Claim"}},
		{"claim in transaction and off", func(app *oke.App) {
			app.Handle(oke.POST("/x"), unary("f.toff", oke.Options{Idempotency: oke.Idempotency{Mode: oke.ModeOff, Claim: oke.ClaimInTx}}))
		}, []string{`flow "f.toff"`, "ClaimInTx and Mode: ModeOff", "fix:"}},
		{"unknown effect", func(app *oke.App) {
			app.Handle(oke.POST("/x"), unary("f.eff", oke.Options{Effects: []oke.Effect{"teleport"}}))
		}, []string{`flow "f.eff"`, `"teleport"`}},
		{"two flows, one name", func(app *oke.App) {
			app.Handle(oke.POST("/a"), unary("f.dup", oke.Options{}))
			app.Handle(oke.POST("/b"), unary("f.dup", oke.Options{}))
		}, []string{`flow "f.dup"`, "two different flows"}},
		{"one route twice", func(app *oke.App) {
			app.Handle(oke.POST("/same"), unary("f.r1", oke.Options{}))
			app.Handle(oke.POST("/same"), unary("f.r2", oke.Options{}))
		}, []string{`flow "f.r2"`, "POST /same"}},
		{"live feed on POST", func(app *oke.App) {
			app.Handle(oke.POST("/x"), oke.NewLive("f.livepost", oke.Options{},
				func(context.Context, noIn, *oke.Fx, func(oke.Event) error) error { return nil }))
		}, []string{`flow "f.livepost"`, "oke.GET"}},
		{"bad webhook TTL", func(app *oke.App) {
			app.Handle(oke.Webhook("/x", "id").DedupeTTL("forever"), unary("f.hookttl", oke.Options{}))
		}, []string{`flow "f.hookttl"`, "dedupe TTL"}},
		{"bad flow name", func(app *oke.App) {
			app.Handle(oke.POST("/x"), unary("has space", oke.Options{}))
		}, []string{`flow "has space"`, "name"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			app := oke.New(oke.Config{SweepInterval: -1})
			t.Cleanup(func() { app.Close(context.Background()) })
			c.bind(app)
			err := app.Start(context.Background())
			var ce *oke.ContractError
			if !errors.As(err, &ce) {
				t.Fatalf("Start = %v, want a *ContractError", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestStartAcceptsEveryValidMode(t *testing.T) {
	app := oke.New(oke.Config{SweepInterval: -1})
	t.Cleanup(func() { app.Close(context.Background()) })
	for i, m := range []oke.Idempotency{
		{}, {TTL: "1h"}, oke.Required, {Mode: oke.ModeRequired, TTL: "7d"}, oke.Off, {TTL: "500ms"},
		{Claim: oke.ClaimFirst}, {Mode: oke.ModeRequired, Claim: oke.ClaimInTx}, {Claim: oke.ClaimAuto, TTL: "1d"},
	} {
		app.Handle(oke.POST("/m"+string(rune('a'+i))), unary("f.mode"+string(rune('a'+i)), oke.Options{Idempotency: m}))
	}
	app.Handle(oke.GET("/read"), unary("f.read", oke.Options{}))
	app.Handle(oke.QUERY("/q"), unary("f.query", oke.Options{Idempotency: oke.Required}))
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestServeRefusesWithoutAValidContract: an app that failed its check never
// runs a flow.
func TestServeRefusesWithoutAValidContract(t *testing.T) {
	app := oke.New(oke.Config{SweepInterval: -1, Logger: quiet()})
	t.Cleanup(func() { app.Close(context.Background()) })
	ran := false
	app.Handle(oke.GET("/x"), oke.NewFlow("f.bad", oke.Options{Idempotency: oke.Required},
		func(context.Context, noIn, *oke.Fx) (oke.Response[string], error) {
			ran = true
			return oke.OK(""), nil
		}))
	w := do(app, "GET", "/x", "")
	if w.Code != 500 || ran {
		t.Fatalf("status %d ran=%v", w.Code, ran)
	}
}
