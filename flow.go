package oke

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"time"
)

// Effect is a kind of thing a flow does to the world through Fx.
type Effect string

// The effects. Every one but EffectRead and EffectSecrets is a non-read
// effect: it qualifies a flow for Idempotency-Key handling, and a failure
// after it is stored as 500 InternalError rather than forgotten.
const (
	EffectRead    Effect = "read"    // store reads
	EffectWrite   Effect = "write"   // store writes
	EffectEmit    Effect = "emit"    // Fx.Emit
	EffectSend    Effect = "send"    // Fx.Send (email, SMS, push)
	EffectCall    Effect = "call"    // Call (another flow in-process)
	EffectFetch   Effect = "fetch"   // Fx.Fetch (outbound HTTP)
	EffectAsk     Effect = "ask"     // Fx.Ask (a language-model call)
	EffectEmbed   Effect = "embed"   // Fx.Embed (an embedding call)
	EffectSecrets Effect = "secrets" // Fx.Secret (read-only)
	EffectRaw     Effect = "raw"     // Fx.Raw (anything else; counts as a write)
)

var effectBits = map[Effect]uint32{
	EffectRead: 1 << 0, EffectWrite: 1 << 1, EffectEmit: 1 << 2, EffectSend: 1 << 3,
	EffectCall: 1 << 4, EffectFetch: 1 << 5, EffectAsk: 1 << 6, EffectEmbed: 1 << 7,
	EffectSecrets: 1 << 8, EffectRaw: 1 << 9,
}

// allEffects lists the effects in a stable order.
var allEffects = []Effect{EffectRead, EffectWrite, EffectEmit, EffectSend, EffectCall,
	EffectFetch, EffectAsk, EffectEmbed, EffectSecrets, EffectRaw}

// nonReadMask has the bits of the effects that qualify a flow.
const nonReadMask = ^uint32(1<<0 | 1<<8)

// Qualifying reports whether e is a non-read effect.
func (e Effect) Qualifying() bool {
	b, ok := effectBits[e]
	return ok && b&nonReadMask != 0
}

// Idempotency is a flow's Idempotency-Key option: when the header is
// honored (Mode), how long a stored response lives (TTL), and how a keyed
// request claims its key (Claim). The zero value is auto: the header is
// optional, a stored response is kept 24 hours, and oke picks the claim.
//
// The five forms of spec 004:
//
//	oke.Auto                                              // auto, TTL 24h (the default; the zero value)
//	oke.Idempotency{TTL: "1h"}                            // auto, TTL 1h
//	oke.Required                                          // a missing header is 400 IdempotencyKeyMissing
//	oke.Idempotency{Mode: oke.ModeRequired, TTL: "1h"}    // required, TTL 1h
//	oke.Off                                               // the header is ignored
//
// A TTL is a positive integer and one of ms, s, m, h, d. An unparseable TTL,
// Required on a flow that cannot honor the header, or a Claim the flow
// cannot use stops the app from starting (see App.Start), naming the fix.
type Idempotency struct {
	Mode  Mode
	TTL   string
	Claim ClaimStrategy
}

// Mode is when a flow honors the Idempotency-Key header (when its binding
// and effects allow: DESIGN.md section 3).
type Mode uint8

const (
	// ModeAuto: the header is optional; a request that sends one runs
	// once per key.
	ModeAuto Mode = iota
	// ModeRequired: a request without the header is 400
	// IdempotencyKeyMissing.
	ModeRequired
	// ModeOff: the header is ignored.
	ModeOff
)

func (m Mode) String() string {
	switch m {
	case ModeRequired:
		return "required"
	case ModeOff:
		return "off"
	}
	return "auto"
}

// ClaimStrategy is how a keyed request claims its key. Every strategy
// answers every request by the same table (DESIGN.md section 3): they differ
// in what a request costs, and in what a concurrent request or a listing
// sees of one that is running.
type ClaimStrategy uint8

const (
	// ClaimAuto lets oke pick: ClaimInTx when the flow's contract (oke
	// extract) shows that every non-read effect of the flow is a statement
	// in its Fx.Tx transaction and the driver can hold a claim in that
	// transaction (driver/postgres); ClaimFirst otherwise.
	ClaimAuto ClaimStrategy = iota
	// ClaimFirst claims the key before the function runs: a row with a
	// lease, renewed while the function runs, that listings show as
	// running. It suits every flow.
	ClaimFirst
	// ClaimInTx holds the claim in the flow's transaction: on
	// driver/postgres it is made inside that transaction, in the round trip
	// of its first statement, and commits with the flow's writes and the
	// stored response — one commit per request instead of two, and no
	// lease. A request cut off (a crash, a lost connection) leaves nothing
	// behind: the key is free at once.
	//
	// It is for flows whose every non-read effect is a statement in Fx.Tx:
	// the function starts before its key is claimed, so until its first
	// statement in the transaction it must change nothing outside oke. Any
	// other non-read effect through fx makes the claim first, on its own;
	// when the key is not the request's to run, that effect returns an
	// error (ErrKeyNotClaimed) instead of happening, and the client gets
	// the replay, 409 or 422 as usual. While the function runs, listings
	// show nothing for its key (no row is written until the commit).
	//
	// For unary flows that are not durable; drivers that cannot hold a
	// claim in a transaction claim first.
	ClaimInTx
)

func (c ClaimStrategy) String() string {
	switch c {
	case ClaimFirst:
		return "first"
	case ClaimInTx:
		return "in_tx"
	}
	return "auto"
}

// The common forms.
var (
	Auto     = Idempotency{}
	Required = Idempotency{Mode: ModeRequired}
	Off      = Idempotency{Mode: ModeOff}
)

func (m Idempotency) String() string {
	s := m.Mode.String()
	if m.Mode == ModeOff {
		return s
	}
	if m.TTL != "" {
		s += " (ttl " + m.TTL + ")"
	}
	if m.Claim != ClaimAuto {
		s += " (claim " + m.Claim.String() + ")"
	}
	return s
}

// Options configure a flow.
type Options struct {
	// Idempotency is the flow's Idempotency-Key mode; the zero value is auto.
	Idempotency Idempotency
	// Effects declares what the flow does. When nil the flow is assumed to
	// have a non-read effect (it qualifies for Idempotency-Key handling),
	// since nothing else tells. Declare []Effect{EffectRead} for a flow that
	// only reads, so the header is ignored.
	Effects []Effect
	// Durable makes every execution of the flow a journal run: its steps
	// (Step, Sleep, NewID) are saved, and after a crash the run picks up
	// where it stopped instead of starting again. Needs a driver with a
	// journal (memory, file).
	Durable bool
	// Retry is the retry policy of the flow's durable steps whose function
	// returns a plain error (a step's own, oke.Retry, wins). Nil means
	// DefaultRetryPolicy. A declared failure is never retried.
	Retry *RetryPolicy
	// Timeout bounds one run of the flow's function. Zero means no limit:
	// the function runs until it returns, even if the client disconnects.
	Timeout time.Duration
	// Description is shown in the contract and the console.
	Description string
	// AllowUnknownFields accepts request bodies with JSON fields the input
	// type does not have, and ignores them (by default they are a 400
	// UnknownField). Meant for webhooks, whose providers add fields without
	// notice. Ignored fields are not part of the fingerprint: two bodies that
	// differ only there are the same request.
	AllowUnknownFields bool
}

// shape is how a flow answers.
type shape uint8

const (
	shapeUnary  shape = iota // one buffered response
	shapeStream              // a streamed (chunked) body
	shapeLive                // a live SSE feed
)

func (s shape) String() string {
	return [...]string{"unary", "stream", "live"}[s]
}

// result is a buffered response produced by a unary flow.
type result struct {
	status      int
	contentType string
	location    string
	header      http.Header
	body        []byte
	storable    bool // a buffered JSON envelope
}

// flow is the type-erased core of every flow kind.
type flow struct {
	name   string
	opts   Options
	shape  shape
	inType reflect.Type
	// decode fills a new input from a JSON body (may be empty) and request
	// parameters, then validates it.
	decode func(body []byte, req input) (any, *Error)
	// inputErr is a bad validation tag of the input type (App.Handle
	// reports it).
	inputErr error
	// unary runs a unary flow.
	unary func(ctx context.Context, in any, fx *Fx) (result, error)
	// stream runs a stream or live flow, writing to w.
	stream func(ctx context.Context, in any, fx *Fx, w http.ResponseWriter) error

	ttl   time.Duration // parsed by App.Start
	claim ClaimStrategy // the claim a keyed request makes, chosen by App.Start: ClaimFirst or ClaimInTx
	// inferred are the effects of the flow's fresh generated contract (nil
	// without one): they decide whether its bindings honor the header.
	inferred []Effect
	// autoInTx: ClaimAuto picks ClaimInTx (the contract says TxOnly, the
	// driver can hold a claim in a transaction, Config.ClaimFirst is off).
	autoInTx bool
	// coalesced: a durable flow whose keyed requests run in one
	// transaction (the contract says Coalesced, and the driver is a
	// driver.RunCommitter that holds claims in transactions).
	coalesced bool
	// contract is "fresh", "stale" or "missing" (App.Start), with what is
	// stale, and source is the contract's FILE:LINE.
	contract, contractProblem, source string
	why                               map[Effect][]string // a fresh contract's
	steps                             []string
	metrics                           *flowMetrics
}

// Handler is implemented by every flow kind (*Flow, *StreamFlow, *LiveFlow)
// so that App.Handle can bind any of them.
type Handler interface {
	// Name is the flow's name, e.g. "payments.charge".
	Name() string
	core() *flow
}

// Flow is a named unit of work with a typed input and output, for example
// "payments.charge". Bind it with App.Handle; call it in-process with Call.
type Flow[In, Out any] struct {
	f  *flow
	do func(context.Context, In, *Fx) (Response[Out], error)
}

// NewFlow declares a flow. do is its handler: it receives the decoded,
// validated input and the effect handle, and returns a response or an error
// (a *Error, e.g. from Fx.Fail, is a declared failure; anything else is 500
// InternalError).
//
// The input is decoded strictly (unknown, duplicated or case-folded keys
// are refused), every field that is not a pointer or omitempty is
// required, and the fields' validation tags are checked: minimum, maximum,
// exclusiveMinimum, exclusiveMaximum, minLength, maxLength, pattern,
// format, enum (comma-separated), minItems, maxItems — huma's convention:
//
//	Amount   int64  `json:"amount" minimum:"1"`
//	Currency string `json:"currency" enum:"usd,eur,gbp"`
//
// A failure answers 400 ValidationFailed naming the field and the rule,
// and stores nothing; oke extract writes the same rules into the OpenAPI
// document. A tag that does not parse is reported by App.Start (naming the
// flow, the type and the field). An input type that also has a Validate()
// error method is validated after that, for what tags cannot say.
func NewFlow[In, Out any](name string, opts Options, do func(ctx context.Context, in In, fx *Fx) (Response[Out], error)) *Flow[In, Out] {
	fl := &Flow[In, Out]{do: do}
	decode, err := decodeFunc[In](opts.AllowUnknownFields)
	fl.f = &flow{
		name: name, opts: opts, shape: shapeUnary,
		inType: reflect.TypeFor[In](),
		decode: decode, inputErr: err,
		unary: func(ctx context.Context, in any, fx *Fx) (result, error) {
			resp, err := do(ctx, in.(In), fx)
			if err != nil {
				return result{}, err
			}
			return resp.result()
		},
	}
	return fl
}

// Name implements Handler.
func (fl *Flow[In, Out]) Name() string { return fl.f.name }
func (fl *Flow[In, Out]) core() *flow  { return fl.f }

// StreamFlow is a flow that streams its response body (chunked). Its
// responses are never stored, and it never honors an Idempotency-Key.
type StreamFlow[In any] struct{ f *flow }

// NewStream declares a stream flow. do writes the body to w; each Write is
// flushed to the client at once. Set the Content-Type on w.Header() before
// the first Write (the default is application/octet-stream).
//
// A stream may outlast the server's WriteTimeout: each write gets that long
// again (through http.ResponseController), so a stream lives as long as it
// writes, while a client that stops reading is still cut off.
func NewStream[In any](name string, opts Options, do func(ctx context.Context, in In, fx *Fx, w http.ResponseWriter) error) *StreamFlow[In] {
	decode, err := decodeFunc[In](opts.AllowUnknownFields)
	return &StreamFlow[In]{f: &flow{
		name: name, opts: opts, shape: shapeStream,
		inType: reflect.TypeFor[In](),
		decode: decode, inputErr: err,
		stream: func(ctx context.Context, in any, fx *Fx, w http.ResponseWriter) error {
			return do(ctx, in.(In), fx, w)
		},
	}}
}

// Name implements Handler.
func (s *StreamFlow[In]) Name() string { return s.f.name }
func (s *StreamFlow[In]) core() *flow  { return s.f }

// Event is one server-sent event of a live feed, and an emitted event.
type Event struct {
	ID   string          `json:"id,omitempty"`
	Name string          `json:"event"`
	Data json.RawMessage `json:"data"`
	Flow string          `json:"flow,omitempty"` // the flow that emitted it
	At   time.Time       `json:"at"`
	// Tenant and Principal are who the emitting flow ran for (its
	// Identity): a feed serves only its caller's tenant's events (App.Subscribe
	// sees them all).
	Tenant    string `json:"tenant,omitempty"`
	Principal string `json:"principal,omitempty"`
}

// LiveFlow is a live SSE feed. It is reached with GET and never stores
// anything.
type LiveFlow[In any] struct{ f *flow }

// NewLive declares a live SSE feed. do calls send for each event until ctx
// ends (the client left, or the app is shutting down: App.Shutdown, Close)
// and returns nil. Like a stream, a feed outlasts the server's WriteTimeout:
// each event gets that long again.
func NewLive[In any](name string, opts Options, do func(ctx context.Context, in In, fx *Fx, send func(Event) error) error) *LiveFlow[In] {
	decode, err := decodeFunc[In](opts.AllowUnknownFields)
	return &LiveFlow[In]{f: &flow{
		name: name, opts: opts, shape: shapeLive,
		inType: reflect.TypeFor[In](),
		decode: decode, inputErr: err,
		stream: func(ctx context.Context, in any, fx *Fx, w http.ResponseWriter) error {
			return do(ctx, in.(In), fx, sseSender(w))
		},
	}}
}

// Name implements Handler.
func (l *LiveFlow[In]) Name() string { return l.f.name }
func (l *LiveFlow[In]) core() *flow  { return l.f }
