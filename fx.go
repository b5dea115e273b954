package oke

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/okengine/oke/internal/flowtx"
	"github.com/okengine/oke/internal/idem"
	"github.com/okengine/oke/internal/journal"
)

// Fx is the effect handle passed to a flow's function. Every effect goes
// through it, so the framework knows what a flow did: whether a failure
// happened before any non-read effect (the Idempotency-Key row is deleted
// and the key may run again) or after one (500 InternalError is stored and
// a new key is required).
//
// An effect is recorded before it is attempted: an effect that fails midway
// still counts, which errs on the side of never running the flow twice.
type Fx struct {
	app      *App
	flow     *flow
	identity Identity
	effects  atomic.Uint32
	parent   *Fx           // set for Call: effects also count for the caller
	run      *journal.Exec // set when the flow runs as a journal run

	txMu sync.Mutex
	tx   *flowtx.Tx // opened by Tx

	// stmts are the releases of the deadlines of the flow's statements
	// with rows (Fx.statement), held (not nil) from callUnary's start and
	// called when the flow's function returns; guarded by txMu, on the
	// root Fx only.
	stmts []func()

	// claim is the request's Idempotency-Key claim when the flow defers it
	// (ClaimInTx); set on the root Fx only.
	claim *idem.Deferred
	// co is set, on the root Fx, while a durable run runs coalesced (all its
	// steps in one transaction: coalesce.go).
	co *coalescing
}

// Identity is who makes a call, as the app's Gate decided.
type Identity struct {
	Tenant    string // "default" unless the gate says otherwise
	Principal string // "user:<id>", "apikey:<id>" or "anon"
}

// Identity returns the caller's identity.
func (fx *Fx) Identity() Identity { return fx.identity }

// Now returns the time on the app's clock (Config.Clock, time.Now by
// default): what durable sleeps and retry delays count in. A flow that
// reads the time through it follows a test's fake clock (oketest.Clock).
// It is no effect.
func (fx *Fx) Now() time.Time { return fx.app.cfg.Clock() }

// Flow returns the name of the running flow.
func (fx *Fx) Flow() string { return fx.flow.name }

// record notes effect e before it is attempted. A non-read effect of a
// flow whose claim is deferred makes the claim first: when the key is not
// the request's to run, record returns the error the effect must return
// instead of happening.
func (fx *Fx) record(e Effect) error {
	bit := effectBits[e]
	if bit&nonReadMask != 0 {
		if co := fx.root().co; co != nil {
			// Outside the run's one transaction: refused before it
			// happens, so that the usual path may run the flow again.
			return co.fail(fmt.Errorf("flow %s: a %s effect outside the run's transaction", fx.flow.name, e))
		}
		if err := fx.root().settleClaim(); err != nil {
			return err
		}
	}
	for f := fx; f != nil; f = f.parent {
		f.effects.Or(bit)
	}
	return nil
}

// root is the Fx of the flow the request runs (Call makes children).
func (fx *Fx) root() *Fx {
	for fx.parent != nil {
		fx = fx.parent
	}
	return fx
}

// settleClaim makes a deferred claim now, if the flow has one not made
// yet, and reports whether the flow may go on.
func (fx *Fx) settleClaim() error {
	if fx.claim == nil {
		return nil
	}
	if err := fx.claim.Settle(); err != nil {
		if errors.Is(err, idem.ErrNotClaimed) {
			return fmt.Errorf("oke: flow %s: %w", fx.flow.name, err)
		}
		return err
	}
	return nil
}

func (fx *Fx) recordBits(bits uint32) {
	for f := fx; f != nil; f = f.parent {
		f.effects.Or(bits)
	}
}

// Effects returns the effects recorded so far, in a stable order.
func (fx *Fx) Effects() []Effect {
	bits := fx.effects.Load()
	var out []Effect
	for _, e := range allEffects {
		if bits&effectBits[e] != 0 {
			out = append(out, e)
		}
	}
	return out
}

// hasNonRead reports whether a non-read effect was recorded.
func (fx *Fx) hasNonRead() bool { return fx.effects.Load()&nonReadMask != 0 }

// Fail returns a declared failure for the flow to return: the client sees
// status, code and message; under an Idempotency-Key it is stored and
// replayed as that failure (not as a 500). It is oke.Fail, at hand where the
// flow has fx (a Gate, which has none, uses oke.Fail).
//
//	return oke.Response[Charge]{}, fx.Fail(402, "PaymentDeclined", "The card was declined.")
func (fx *Fx) Fail(status int, code, message string) error { return Fail(status, code, message) }

// EmitOption configures Fx.Emit.
type EmitOption func(*Event)

// EventID gives an emitted event an ID of its own (for example the
// provider's event ID): the runs it starts are deduped on it, so emitting
// the same event twice starts each OnEvent flow once.
func EventID(id string) EmitOption { return func(e *Event) { e.ID = id } }

// Emit publishes an event. It is an emit effect. Subscribers in this process
// (App.Subscribe, e.g. a live feed) see it at once; every flow bound with
// OnEvent(name) gets a journal run with the payload as input, delivered at
// least once. Inside a step of a durable run, or with EventID, those runs
// start exactly once however often the step runs again; outside a step
// without an ID, every call starts new runs — so emit inside a step.
func (fx *Fx) Emit(ctx context.Context, name string, payload any, opts ...EmitOption) error {
	if err := fx.record(EffectEmit); err != nil {
		return err
	}
	data, err := json.Marshal(payload)
	if err != nil {
		return fmt.Errorf("emit %q: encode payload: %w", name, err)
	}
	ev := Event{Name: name, Data: data, Flow: fx.flow.name, At: time.Now().UTC(),
		Tenant: fx.identity.Tenant, Principal: fx.identity.Principal}
	for _, o := range opts {
		o(&ev)
	}
	fx.app.publish(ev)
	return fx.app.deliver(ctx, fx, ev)
}

// deliver starts a run of every flow bound to the event.
func (a *App) deliver(ctx context.Context, fx *Fx, ev Event) error {
	var step *stepInfo
	for _, rt := range a.routes {
		if rt.b.event != ev.Name {
			continue
		}
		dedupe := ""
		switch {
		case ev.ID != "":
			dedupe = "event:" + ev.Name + ":" + ev.ID + ">" + rt.f.name
		default:
			if step == nil {
				if step = stepFrom(ctx); step != nil {
					step.emits++
				}
			}
			if step != nil {
				dedupe = "emit:" + step.key() + "#" + strconv.Itoa(step.emits) + ">" + rt.f.name
			}
		}
		if _, err := a.startRun(ctx, rt.f, ev.Data, fx.identity, fx.runID(), ev.Name, dedupe); err != nil {
			return fmt.Errorf("emit %q: %w", ev.Name, err)
		}
	}
	return nil
}

// Message is an email, SMS or push notification for Fx.Send.
type Message struct {
	Channel string // "email", "sms", "push", or the sender's own
	To      string
	Subject string
	Body    string
	// IdempotencyKey, when set, is passed to the provider so that it can
	// drop a repeated send.
	IdempotencyKey string
}

// Sender delivers messages for Fx.Send. The app configures one in Config.
type Sender interface {
	Send(ctx context.Context, m Message) error
}

// Send delivers a message through Config.Sender. It is a send effect.
func (fx *Fx) Send(ctx context.Context, m Message) error {
	if err := fx.record(EffectSend); err != nil {
		return err
	}
	if m.IdempotencyKey == "" {
		m.IdempotencyKey = StepKey(ctx)
	}
	if fx.app.cfg.Sender == nil {
		return fmt.Errorf("send %s to %q: %w (set Config.Sender)", m.Channel, m.To, ErrNotConfigured)
	}
	return fx.app.cfg.Sender.Send(ctx, m)
}

// Fetch sends an outbound HTTP request with Config.HTTPClient (default
// http.DefaultClient). It is a fetch effect. Inside a step (the request's
// context is the step's), a request without an Idempotency-Key header gets
// StepKey's key, the same on every attempt of the step, so a provider that
// dedupes on it sees a repeat as a repeat.
func (fx *Fx) Fetch(req *http.Request) (*http.Response, error) {
	if err := fx.record(EffectFetch); err != nil {
		return nil, err
	}
	if k := StepKey(req.Context()); k != "" && req.Header.Get("Idempotency-Key") == "" {
		req.Header.Set("Idempotency-Key", k)
	}
	return fx.app.httpClient().Do(req)
}

// HTTPClient returns an *http.Client whose every request is recorded as a
// fetch effect, for SDKs that take a client.
func (fx *Fx) HTTPClient() *http.Client {
	base := fx.app.httpClient()
	c := *base
	rt := base.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	c.Transport = fetchTransport{fx: fx, next: rt}
	return &c
}

type fetchTransport struct {
	fx   *Fx
	next http.RoundTripper
}

func (t fetchTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if err := t.fx.record(EffectFetch); err != nil {
		if r.Body != nil {
			r.Body.Close() // a RoundTripper closes the body, also on errors
		}
		return nil, err
	}
	return t.next.RoundTrip(r)
}

// AskRequest is a language-model call.
type AskRequest struct {
	Model  string
	System string
	Prompt string
}

// AskResponse is a language model's answer.
type AskResponse struct {
	Text string
}

// LanguageModel answers Fx.Ask. The app configures one in Config.
type LanguageModel interface {
	Ask(ctx context.Context, req AskRequest) (AskResponse, error)
}

// Embedder answers Fx.Embed. The app configures one in Config.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// Ask calls Config.LanguageModel. It is an ask effect.
func (fx *Fx) Ask(ctx context.Context, req AskRequest) (AskResponse, error) {
	if err := fx.record(EffectAsk); err != nil {
		return AskResponse{}, err
	}
	if fx.app.cfg.LanguageModel == nil {
		return AskResponse{}, fmt.Errorf("ask: %w (set Config.LanguageModel)", ErrNotConfigured)
	}
	return fx.app.cfg.LanguageModel.Ask(ctx, req)
}

// Embed calls Config.Embedder. It is an embed effect.
func (fx *Fx) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if err := fx.record(EffectEmbed); err != nil {
		return nil, err
	}
	if fx.app.cfg.Embedder == nil {
		return nil, fmt.Errorf("embed: %w (set Config.Embedder)", ErrNotConfigured)
	}
	return fx.app.cfg.Embedder.Embed(ctx, texts)
}

// Secrets looks up secrets for Fx.Secret.
type Secrets interface {
	Secret(ctx context.Context, name string) (string, error)
}

// EnvSecrets reads secrets from environment variables.
type EnvSecrets struct{}

// Secret implements Secrets.
func (EnvSecrets) Secret(_ context.Context, name string) (string, error) {
	v, ok := os.LookupEnv(name)
	if !ok {
		return "", fmt.Errorf("secret %q: %w", name, ErrSecretNotFound)
	}
	return v, nil
}

// Secret reads a secret from Config.Secrets (default: environment
// variables). It is a read-only effect: it does not qualify a flow for
// Idempotency-Key handling.
func (fx *Fx) Secret(ctx context.Context, name string) (string, error) {
	fx.record(EffectSecrets) // a read: never refused
	return fx.app.secrets().Secret(ctx, name)
}

// Raw runs fn as an effect oke cannot see inside (a queue publish, a file
// write, a gRPC call). It counts as a write. what names it in logs.
func (fx *Fx) Raw(ctx context.Context, what string, fn func(ctx context.Context) error) error {
	if err := fx.record(EffectRaw); err != nil {
		return err
	}
	if err := fn(ctx); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// Call runs another flow in-process, with the caller's identity, and returns
// its output. It is a call effect. An in-process call has no request: it
// never honors an Idempotency-Key; the caller's key (if any) protects the
// whole call tree. Effects of the called flow count for the caller too.
func Call[In, Out any](ctx context.Context, fx *Fx, f *Flow[In, Out], in In) (Out, error) {
	var zero Out
	if err := fx.record(EffectCall); err != nil {
		return zero, err
	}
	if v, ok := any(&in).(Validator); ok {
		if err := v.Validate(); err != nil {
			return zero, fmt.Errorf("call %s: %w", f.f.name, validationError(err))
		}
	}
	child := &Fx{app: fx.app, flow: f.f, identity: fx.identity, parent: fx}
	if m := f.f.metrics; m != nil {
		m.executions.Inc()
	}
	resp, err := f.do(ctx, in, child)
	if err != nil {
		return zero, err
	}
	return resp.Body, nil
}
