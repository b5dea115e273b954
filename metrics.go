package oke

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// The outcomes counted by oke_idempotency_outcomes_total.
const (
	OutcomeLive        = "live"        // the flow ran under a fresh claim
	OutcomeReplayed    = "replayed"    // a stored response was replayed
	OutcomeInProgress  = "in_progress" // 409: the same request is still running
	OutcomeReused      = "reused"      // 422: the key was used with another request
	OutcomeInvalid     = "invalid"     // 400: the key is malformed
	OutcomeMissing     = "missing"     // 400: a required key is missing
	OutcomeNone        = "none"        // the flow honors keys; none was sent
	OutcomeIgnored     = "ignored"     // a key was sent to a flow that does not honor it
	OutcomeUnavailable = "unavailable" // 503 StoreUnavailable or Unavailable: nothing of the request took effect
	OutcomeUnknown     = "unknown"     // 503 OutcomeUnknown: the flow ran, its outcome was not stored
)

var outcomeNames = []string{OutcomeLive, OutcomeReplayed, OutcomeInProgress, OutcomeReused,
	OutcomeInvalid, OutcomeMissing, OutcomeNone, OutcomeIgnored, OutcomeUnavailable, OutcomeUnknown}

// unavailableCodes are the codes of the 503s the app answers, resolved at
// Handle time.
var unavailableCodes = []string{"StoreUnavailable", "OutcomeUnknown", "Unavailable", "ShuttingDown"}

type metrics struct {
	reg        *prometheus.Registry
	executions *prometheus.CounterVec
	outcomes   *prometheus.CounterVec
	claim      *prometheus.HistogramVec
	notStored  *prometheus.CounterVec
	down       *prometheus.CounterVec
	waiting    *prometheus.GaugeVec
	wakeups    *prometheus.CounterVec
	waitReads  *prometheus.CounterVec
	refused    *prometheus.CounterVec
	fallbacks  *prometheus.CounterVec
	shed       *prometheus.CounterVec
}

// The causes counted by oke_idempotency_wait_wakeups_total.
const (
	wakeLocal  = "local"  // the key completed in this process
	wakeNotify = "notify" // the driver's notification (driver.KeyWaiter)
	wakePoll   = "poll"   // the poll timer
)

var wakeCauses = []string{wakeLocal, wakeNotify, wakePoll}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		executions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oke_flow_executions_total",
			Help: "How many times a flow's function actually started in this process (with a deferred claim: started and got its key).",
		}, []string{"flow"}),
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oke_idempotency_outcomes_total",
			Help: "Idempotency-Key outcomes by flow: live, replayed, in_progress, reused, invalid, missing, none, ignored, unavailable (503, nothing took effect), unknown (503 OutcomeUnknown).",
		}, []string{"flow", "outcome"}),
		claim: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "oke_idempotency_claim_seconds",
			Help:    "Latency of the atomic claim-or-read of an Idempotency-Key row.",
			Buckets: []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1},
		}, []string{"flow"}),
		notStored: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oke_idempotency_store_failures_total",
			Help: "Responses that could not be stored (lease lost to another owner, or store failure after retries).",
		}, []string{"flow"}),
	}
	m.down = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "oke_unavailable_total",
		Help: "Every 503 a flow's route answered, keyed or not, by error code: StoreUnavailable (nothing ran), Unavailable (ran, changed nothing), OutcomeUnknown (may have run), ShuttingDown.",
	}, []string{"flow", "code"})
	m.waiting = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "oke_idempotency_waiting",
		Help: "Requests held right now by Prefer: wait until their key's first request finishes.",
	}, []string{"flow"})
	m.wakeups = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "oke_idempotency_wait_wakeups_total",
		Help: "Times the watcher of a key that requests are held for by Prefer: wait (one per key, for all of them) woke to read the key's row, by cause: local (a completion in this process), notify (the driver's notification of another instance's completion, or of its listener reconnecting), poll (the fallback timer).",
	}, []string{"flow", "by"})
	m.waitReads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "oke_idempotency_wait_reads_total",
		Help: "Reads of a key's row by the watcher of the requests Prefer: wait holds for it: the first, as the watch begins, and one per wakeup.",
	}, []string{"flow"})
	m.refused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "oke_idempotency_wait_refused_total",
		Help: "Requests with Prefer: wait for a key in progress answered at once (409, no Preference-Applied) because the app held as many as Config.MaxWaitersPerKey for the key or Config.MaxWaiters in all.",
	}, []string{"flow"})
	m.fallbacks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "oke_durable_coalesce_fallbacks_total",
		Help: "Keyed requests of a coalesced durable flow (its steps in one transaction) that left it and ran again the usual way: a step failed, an effect outside the transaction, or no statement at all.",
	}, []string{"flow"})
	m.shed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "oke_requests_shed_total",
		Help: "Requests answered 503 StoreUnavailable at once, not run, because Config.MaxInFlight requests were in progress.",
	}, []string{"flow"})
	m.reg.MustRegister(m.executions, m.outcomes, m.claim, m.notStored, m.down, m.waiting, m.wakeups, m.waitReads, m.refused, m.fallbacks, m.shed,
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	return m
}

// flowMetrics holds one flow's series, resolved once at Handle time so the
// request path does no label lookups.
type flowMetrics struct {
	executions prometheus.Counter
	outcomes   map[string]prometheus.Counter
	claim      prometheus.Observer
	notStored  prometheus.Counter
	down       map[string]prometheus.Counter
	downVec    *prometheus.CounterVec
	waiting    prometheus.Gauge
	wakeups    map[string]prometheus.Counter // by cause
	waitReads  prometheus.Counter            // the watcher's reads of its key's row
	// waitRefused: requests with Prefer: wait not held (the caps).
	waitRefused prometheus.Counter
	// coalesceFallbacks: requests of a coalesced run that ran again the
	// usual way.
	coalesceFallbacks prometheus.Counter
	shed              prometheus.Counter // requests shed past Config.MaxInFlight
	name              string
}

// unavailable is the counter of 503s with code.
func (fm *flowMetrics) unavailable(code string) prometheus.Counter {
	if c, ok := fm.down[code]; ok {
		return c
	}
	return fm.downVec.WithLabelValues(fm.name, code)
}

func (m *metrics) forFlow(name string) *flowMetrics {
	fm := &flowMetrics{
		executions:  m.executions.WithLabelValues(name),
		outcomes:    make(map[string]prometheus.Counter, len(outcomeNames)),
		claim:       m.claim.WithLabelValues(name),
		notStored:   m.notStored.WithLabelValues(name),
		down:        make(map[string]prometheus.Counter, len(unavailableCodes)),
		downVec:     m.down,
		waiting:     m.waiting.WithLabelValues(name),
		wakeups:     make(map[string]prometheus.Counter, len(wakeCauses)),
		waitRefused: m.refused.WithLabelValues(name),
		waitReads:   m.waitReads.WithLabelValues(name),
		name:        name,

		coalesceFallbacks: m.fallbacks.WithLabelValues(name),
		shed:              m.shed.WithLabelValues(name),
	}
	for _, c := range wakeCauses {
		fm.wakeups[c] = m.wakeups.WithLabelValues(name, c)
	}
	for _, c := range unavailableCodes {
		fm.down[c] = m.down.WithLabelValues(name, c)
	}
	for _, o := range outcomeNames {
		fm.outcomes[o] = m.outcomes.WithLabelValues(name, o)
	}
	return fm
}

// MetricsHandler serves the app's metrics in the Prometheus text format,
// or in OpenMetrics to a scraper that asks for it (Accept), with exemplars:
// a sampled request's observation of oke_idempotency_claim_seconds
// carries its trace_id.
func (a *App) MetricsHandler() http.Handler {
	// OpenMetrics, for a scraper that asks for it: the only format that
	// carries the histograms' exemplars (a traced request's trace_id).
	return promhttp.HandlerFor(a.metrics.reg, promhttp.HandlerOpts{EnableOpenMetrics: true})
}

// Registry returns the app's Prometheus registry, to add series of your own
// or to gather oke's into another registry.
func (a *App) Registry() *prometheus.Registry { return a.metrics.reg }
