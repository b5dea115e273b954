package app

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/okengine/oke"
)

// The fake refund provider: a stand-in for a payment provider's refund API,
// served by the demo at /_provider/refunds. Like Stripe it dedupes on the
// Idempotency-Key header: a repeated key gets the first refund back (with
// Idempotent-Replayed: true) and refunds nothing more. It keeps its refunds
// in the business database (table provider_refunds), so that it dedupes across restarts,
// and counts the requests each key made — GET /_provider/refunds shows them.
//
// payments.refund calls it in-process by default (see Config.Provider), over
// the same HTTP handler, so no network is needed; -provider points the demo
// at another provider instead.

// ProviderPath is where the demo serves its fake refund provider.
const ProviderPath = "/_provider/refunds"

// inProcessURL is the provider URL that selfTransport serves in-process.
const inProcessURL = "http://in-process" + ProviderPath

// ProviderRefundIn is the body of POST /_provider/refunds.
type ProviderRefundIn struct {
	ChargeID  string `json:"chargeId"`
	Amount    int64  `json:"amount"`
	Currency  string `json:"currency"`
	Reference string `json:"reference"` // the caller's id for the refund
}

// ProviderRefund is a refund as the provider shows it.
type ProviderRefund struct {
	ID             string `json:"id"` // "pr_" and 24 hex digits
	ChargeID       string `json:"chargeId"`
	Amount         int64  `json:"amount"`
	Currency       string `json:"currency"`
	Reference      string `json:"reference"`
	IdempotencyKey string `json:"idempotencyKey"`
	Requests       int    `json:"requests"` // how many requests carried its key
	CreatedAt      string `json:"createdAt"`
}

// ProviderRefundList is the answer of GET /_provider/refunds.
type ProviderRefundList struct {
	Refunds []ProviderRefund `json:"refunds"`
}

// provider serves the fake provider's routes. Like every answer of the
// demo, its errors are the JSON envelope — a wrong method too, which
// http.ServeMux would answer in plain text.
func (s *Server) provider() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != ProviderPath {
			oke.WriteError(w, oke.ErrNotFound.WithMessage("No route matches %s %s.", oke.Quote(r.Method), oke.Quote(r.URL.Path)))
			return
		}
		switch r.Method {
		case http.MethodPost:
			s.providerRefund(w, r)
		case http.MethodGet, http.MethodHead:
			s.providerList(w, r)
		default:
			w.Header().Set("Allow", "GET, HEAD, POST")
			oke.WriteError(w, oke.Fail(http.StatusMethodNotAllowed, "MethodNotAllowed",
				r.Method+" is not allowed here; use GET or POST."))
		}
	})
}

// providerStoreTimeout bounds the fake provider's statements.
const providerStoreTimeout = 2 * time.Second

// providerRefund is POST /_provider/refunds.
func (s *Server) providerRefund(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	if key == "" || len(key) > 255 {
		oke.WriteError(w, oke.Fail(http.StatusBadRequest, "IdempotencyKeyMissing", "The provider requires an Idempotency-Key header of 1–255 characters."))
		return
	}
	var in ProviderRefundIn
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil || in.ChargeID == "" || in.Amount <= 0 {
		oke.WriteError(w, oke.Fail(http.StatusBadRequest, "InvalidInput", `The body must be {"chargeId":str,"amount":int>0,"currency":str,"reference":str}.`))
		return
	}
	var p ProviderRefund
	// A provider answers promptly or says it cannot: its own database gets
	// a short deadline, and a failure to store is a 503 the caller retries.
	ctx, cancel := context.WithTimeout(r.Context(), providerStoreTimeout)
	defer cancel()
	err := s.db.QueryRowContext(ctx,
		`INSERT INTO provider_refunds (idempotency_key, charge_id, amount, currency, reference)
		 VALUES ($1, $2, $3, $4, $5)
		 ON CONFLICT (idempotency_key) DO UPDATE SET requests = provider_refunds.requests + 1
		 RETURNING id, charge_id, amount, currency, reference, idempotency_key, requests, created_at`,
		key, in.ChargeID, in.Amount, in.Currency, in.Reference).
		Scan(&p.ID, &p.ChargeID, &p.Amount, &p.Currency, &p.Reference, &p.IdempotencyKey, &p.Requests, &p.CreatedAt)
	if err != nil {
		s.log.Error("payments: fake provider: store refund", "err", err)
		w.Header().Set("Retry-After", "1")
		oke.WriteError(w, oke.Fail(http.StatusServiceUnavailable, "ProviderUnavailable", "The provider could not store the refund; retry with the same Idempotency-Key."))
		return
	}
	if p.ChargeID != in.ChargeID || p.Amount != in.Amount || p.Currency != in.Currency || p.Reference != in.Reference {
		oke.WriteError(w, oke.ErrIdempotencyKeyReused)
		return
	}
	if p.Requests > 1 {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	writeJSON(w, http.StatusOK, p)
}

// providerList is GET /_provider/refunds: every refund the provider made.
func (s *Server) providerList(w http.ResponseWriter, r *http.Request) {
	var (
		rows *sql.Rows
		err  error
	)
	if s.dialect == postgresDialect {
		rows, err = s.rdb.QueryContext(r.Context(), listProviderRefundsPostgres)
	} else {
		rows, err = s.rdb.QueryContext(r.Context(), listProviderRefundsSQLite)
	}
	if err != nil {
		s.log.Error("payments: fake provider: list refunds", "err", err)
		oke.WriteError(w, oke.ErrInternal)
		return
	}
	defer rows.Close()
	out := ProviderRefundList{Refunds: []ProviderRefund{}}
	for rows.Next() {
		var p ProviderRefund
		if err := rows.Scan(&p.ID, &p.ChargeID, &p.Amount, &p.Currency, &p.Reference, &p.IdempotencyKey, &p.Requests, &p.CreatedAt); err != nil {
			s.log.Error("payments: fake provider: list refunds", "err", err)
			oke.WriteError(w, oke.ErrInternal)
			return
		}
		out.Refunds = append(out.Refunds, p)
	}
	if err := rows.Err(); err != nil {
		s.log.Error("payments: fake provider: list refunds", "err", err)
		oke.WriteError(w, oke.ErrInternal)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		oke.WriteError(w, oke.ErrInternal)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// httpClient is the client of fx.Fetch: requests to the in-process provider
// URL are served by h without a network; the rest go out as usual.
func httpClient(h http.Handler) *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: selfTransport{h: h, next: http.DefaultTransport}}
}

// selfTransport serves requests for inProcessURL's host with h.
type selfTransport struct {
	h    http.Handler
	next http.RoundTripper
}

func (t selfTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Host != "in-process" {
		return t.next.RoundTrip(r)
	}
	in := r.Clone(r.Context())
	if in.Body == nil {
		in.Body = http.NoBody
	}
	in.RequestURI = r.URL.RequestURI()
	in.RemoteAddr = "in-process"
	rec := &recorder{header: http.Header{}}
	t.h.ServeHTTP(rec, in)
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	return &http.Response{
		Status:        strconv.Itoa(rec.status) + " " + http.StatusText(rec.status),
		StatusCode:    rec.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        rec.header,
		Body:          io.NopCloser(bytes.NewReader(rec.body.Bytes())),
		ContentLength: int64(rec.body.Len()),
		Request:       r,
	}, nil
}

// recorder is a minimal http.ResponseWriter that keeps the response.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(b)
}

// providerURL returns the refund provider's URL of cfg.
func providerURL(cfg Config) string {
	if cfg.Provider == "" {
		return inProcessURL
	}
	return cfg.Provider
}
