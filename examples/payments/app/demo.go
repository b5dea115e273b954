package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/okengine/oke"
)

// SlowIn is the body of POST /slow.
type SlowIn struct {
	Ms int `json:"ms" minimum:"0" maximum:"600000"` // how long to wait before writing
}

// Slow is the answer of POST /slow.
type Slow struct {
	ID int64 `json:"id"`
	Ms int   `json:"ms"`
}

// slowFlow is demo.slow: it waits, then writes a row. It shows the 409
// IdempotencyInProgress answer to a retry that arrives while it runs.
func (s *Server) slowFlow() *oke.Flow[SlowIn, Slow] {
	return oke.NewFlow("demo.slow", oke.Options{
		Description: "Wait ms milliseconds, then write a row.",
	}, func(ctx context.Context, in SlowIn, fx *oke.Fx) (oke.Response[Slow], error) {
		t := time.NewTimer(time.Duration(in.Ms) * time.Millisecond)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return oke.Response[Slow]{}, ctx.Err()
		case <-t.C:
		}
		out := Slow{Ms: in.Ms}
		err := fx.Store(s.db).QueryRow(ctx,
			`INSERT INTO slow_rows (ms) VALUES ($1) RETURNING id`, in.Ms).Scan(&out.ID)
		if err != nil {
			return oke.Response[Slow]{}, fmt.Errorf("insert slow row: %w", err)
		}
		return oke.Created(out, ""), nil
	})
}

// NoteIn is the body of POST /notes.
type NoteIn struct {
	Text string `json:"text" minLength:"1" maxLength:"10000"`
}

// Note is a stored note.
type Note struct {
	ID        int64  `json:"id"`
	Text      string `json:"text"`
	CreatedAt string `json:"createdAt"`
}

// NoteTTL is how long demo.note keeps a stored response.
const NoteTTL = "2s"

// insertNote writes a note through st: a helper, so that oke extract
// follows the store into it (demo.note's write is inferred through it).
func insertNote(ctx context.Context, st *oke.Store, text string) (Note, error) {
	var n Note
	err := st.QueryRow(ctx, `INSERT INTO notes (text) VALUES ($1) RETURNING id, text, created_at`, text).
		Scan(&n.ID, &n.Text, &n.CreatedAt)
	if err != nil {
		return Note{}, fmt.Errorf("insert note: %w", err)
	}
	return n, nil
}

// noteFlow is demo.note: it writes a note; its Idempotency-Key TTL is 2s, so
// the same key runs it again once 2s have passed.
func (s *Server) noteFlow() *oke.Flow[NoteIn, Note] {
	return oke.NewFlow("demo.note", oke.Options{
		Idempotency: oke.Idempotency{TTL: NoteTTL},
		Description: "Write a note. A stored response lives 2s.",
	}, func(ctx context.Context, in NoteIn, fx *oke.Fx) (oke.Response[Note], error) {
		n, err := insertNote(ctx, fx.Store(s.db), in.Text)
		if err != nil {
			return oke.Response[Note]{}, err
		}
		if err := fx.Emit(ctx, "note.created", n); err != nil {
			return oke.Response[Note]{}, err
		}
		return oke.Created(n, ""), nil
	})
}

// FailIn is the body of POST /fail.
type FailIn struct {
	When string `json:"when" enum:"before,after,declared"`
}

// failFlow is demo.fail: it fails in one of three ways, each with its own
// Idempotency-Key rule.
//
//	before    a plain error before any write: 500, nothing is stored, the
//	          same key runs the flow again
//	after     a row is written, then a plain error: 500 InternalError is
//	          stored and replayed; a new key is required
//	declared  fx.Fail(402, "PaymentDeclined", …): stored and replayed as 402
func (s *Server) failFlow() *oke.Flow[FailIn, struct{}] {
	return oke.NewFlow("demo.fail", oke.Options{
		Description: `Fail "before" any write (500, key may run again), "after" a write (stored 500), or "declared" (stored 402).`,
	}, func(ctx context.Context, in FailIn, fx *oke.Fx) (oke.Response[struct{}], error) {
		switch in.When {
		case "before":
			return oke.Response[struct{}]{}, errors.New("demo.fail: failing before any write, as asked")
		case "after":
			if _, err := fx.Store(s.db).Exec(ctx, `INSERT INTO fail_writes (stage) VALUES ($1)`, in.When); err != nil {
				return oke.Response[struct{}]{}, fmt.Errorf("insert fail row: %w", err)
			}
			return oke.Response[struct{}]{}, errors.New("demo.fail: failing after a write, as asked")
		}
		return oke.Response[struct{}]{}, fx.Fail(http.StatusPaymentRequired, "PaymentDeclined", "The card was declined.")
	})
}

// ExportIn is the (optional) body of POST /export.
type ExportIn struct {
	Lines   int `json:"lines,omitempty" minimum:"0" maximum:"1000"`    // how many lines; 0 means 5
	DelayMs int `json:"delayMs,omitempty" minimum:"0" maximum:"10000"` // pause between lines; 0 means 50
}

// Validate fills the defaults.
func (in *ExportIn) Validate() error {
	if in.Lines == 0 {
		in.Lines = 5
	}
	if in.DelayMs == 0 {
		in.DelayMs = 50
	}
	return nil
}

// ExportLine is one line of POST /export's body (NDJSON).
type ExportLine struct {
	Line int    `json:"line"`
	Of   int    `json:"of"`
	At   string `json:"at"`
}

// exportFlow is demo.export: a chunked NDJSON body written over a short
// time. A stream is never stored: an Idempotency-Key is ignored, and every
// call runs.
func (s *Server) exportFlow() *oke.StreamFlow[ExportIn] {
	return oke.NewStream("demo.export", oke.Options{
		Description: "Stream NDJSON lines over a short time (chunked; never stored).",
	}, func(ctx context.Context, in ExportIn, fx *oke.Fx, w http.ResponseWriter) error {
		w.Header().Set("Content-Type", "application/x-ndjson")
		enc := json.NewEncoder(w)
		for i := 1; i <= in.Lines; i++ {
			if i > 1 {
				t := time.NewTimer(time.Duration(in.DelayMs) * time.Millisecond)
				select {
				case <-ctx.Done():
					t.Stop()
					return ctx.Err()
				case <-t.C:
				}
			}
			line := ExportLine{Line: i, Of: in.Lines, At: time.Now().UTC().Format(time.RFC3339Nano)}
			if err := enc.Encode(line); err != nil {
				return err
			}
		}
		return nil
	})
}

// WebhookIn is a provider's event, the body of POST /webhooks/provider. Only
// id and type are read; the rest of the payload is kept as it came.
type WebhookIn struct {
	ID      string          `json:"id" minLength:"1"`   // "evt_…": the dedupe key
	Type    string          `json:"type" minLength:"1"` // e.g. "charge.succeeded"
	Payload json.RawMessage `json:"-"`
}

// UnmarshalJSON reads id and type and keeps the whole payload. Unlike other
// inputs, a webhook accepts fields it does not know: providers add fields
// without notice.
func (in *WebhookIn) UnmarshalJSON(b []byte) error {
	var v struct {
		ID   string `json:"id"`
		Type string `json:"type"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	in.ID, in.Type, in.Payload = v.ID, v.Type, append(json.RawMessage(nil), b...)
	return nil
}

// WebhookAck is the answer to a webhook delivery.
type WebhookAck struct {
	Received bool   `json:"received"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	// Duplicate is true when the event id was already in the database
	// (possible only after the binding's dedupe window).
	Duplicate bool `json:"duplicate"`
}

// webhookFlow is demo.webhook: the binding dedupes on the payload's id, so a
// second delivery replays the first answer and does nothing. The UNIQUE
// event id in the business database backs that up.
func (s *Server) webhookFlow() *oke.Flow[WebhookIn, WebhookAck] {
	return oke.NewFlow("demo.webhook", oke.Options{
		Description: "Receive a provider event once, deduped on its id.",
	}, func(ctx context.Context, in WebhookIn, fx *oke.Fx) (oke.Response[WebhookAck], error) {
		res, err := fx.Store(s.db).Exec(ctx,
			`INSERT INTO webhook_events (event_id, type, payload) VALUES ($1, $2, $3)
			 ON CONFLICT (event_id) DO NOTHING`, in.ID, in.Type, string(in.Payload))
		if err != nil {
			return oke.Response[WebhookAck]{}, fmt.Errorf("insert webhook event %q: %w", in.ID, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return oke.Response[WebhookAck]{}, fmt.Errorf("insert webhook event %q: %w", in.ID, err)
		}
		ack := WebhookAck{Received: true, ID: in.ID, Type: in.Type, Duplicate: n == 0}
		if !ack.Duplicate {
			if err := fx.Emit(ctx, "webhook.received", ack); err != nil {
				return oke.Response[WebhookAck]{}, err
			}
		}
		return oke.OK(ack), nil
	})
}

// Whoami is the answer of GET /whoami: the identity the gate gave.
type Whoami struct {
	Tenant    string `json:"tenant"`
	Principal string `json:"principal"`
}

// whoamiFlow is demo.whoami: it shows the caller's identity.
func (s *Server) whoamiFlow() *oke.Flow[struct{}, Whoami] {
	return oke.NewFlow("demo.whoami", oke.Options{
		Effects:     []oke.Effect{},
		Description: "Show the caller's tenant and principal.",
	}, func(ctx context.Context, _ struct{}, fx *oke.Fx) (oke.Response[Whoami], error) {
		id := fx.Identity()
		return oke.OK(Whoami{Tenant: id.Tenant, Principal: id.Principal}), nil
	})
}
