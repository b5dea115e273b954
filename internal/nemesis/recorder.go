package nemesis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// A Recorder sends the history's requests and records each as an Op. It
// is safe for concurrent use.
type Recorder struct {
	client  *http.Client
	timeout time.Duration
	start   time.Time

	mu  sync.Mutex
	seq int
	ops []Op
}

// NewRecorder returns a recorder whose requests each get timeout to
// answer; the history's times count from now.
func NewRecorder(timeout time.Duration) *Recorder {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	return &Recorder{client: &http.Client{Transport: tr}, timeout: timeout, start: time.Now()}
}

// Since is the time since the recorder started: the history's clock.
func (r *Recorder) Since() time.Duration { return time.Since(r.start) }

// Charge sends POST base/charges with key and amount, records the op and
// returns it. The request runs on a context of its own (bounded by the
// recorder's timeout), so that an op in flight when the run ends still
// gets its answer into the history.
func (r *Recorder) Charge(base, target string, client int, phase Phase, key string, amount int64) Op {
	return r.post(Op{Client: client, Target: target, Phase: phase, Route: "/charges", Key: key, Amount: amount,
		Body: fmt.Sprintf(`{"amount":%d,"currency":"usd"}`, amount)}, base)
}

// Refund sends POST base/refunds of chargeID with key, as Charge does.
func (r *Recorder) Refund(base, target string, client int, phase Phase, key, chargeID string) Op {
	return r.post(Op{Client: client, Target: target, Phase: phase, Route: "/refunds", Key: key,
		Body: fmt.Sprintf(`{"chargeId":%q}`, chargeID)}, base)
}

func (r *Recorder) post(op Op, base string) Op {
	body := op.Body
	r.mu.Lock()
	r.seq++
	op.Seq = r.seq
	r.mu.Unlock()
	key := op.Key

	ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
	defer cancel()
	op.Call = r.Since()
	resp, err := r.do(ctx, base+op.Route, key, body)
	if err == nil {
		var b []byte
		b, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil {
			op.Status = resp.StatusCode
			op.RespBody = string(b)
			op.Location = resp.Header.Get("Location")
			op.Replayed = resp.Header.Get("Idempotent-Replayed") == "true"
			op.RetryAfter = resp.Header.Get("Retry-After")
			var env struct {
				Error struct {
					Code string `json:"code"`
				} `json:"error"`
			}
			if op.Status >= 300 && json.Unmarshal(b, &env) == nil {
				op.Code = env.Error.Code
			}
		}
	}
	op.Return = r.Since()
	if err != nil {
		op.Status = 0
		op.Err = err.Error()
		op.Timeout = errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded)
	}
	r.mu.Lock()
	r.ops = append(r.ops, op)
	r.mu.Unlock()
	return op
}

func (r *Recorder) do(ctx context.Context, url, key, body string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Content-Type", "application/json")
	return r.client.Do(req)
}

// Ops is a copy of the history so far.
func (r *Recorder) Ops() []Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Op(nil), r.ops...)
}

// CloseIdle closes the recorder's idle connections.
func (r *Recorder) CloseIdle() { r.client.CloseIdleConnections() }
