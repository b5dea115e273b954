package oke

import (
	"fmt"
	"net/http"
	"strings"
)

// A Binding says how a flow is reached over HTTP. Build one with POST, PUT,
// PATCH, DELETE, QUERY, GET, RPC or Webhook.
type Binding struct {
	Method string
	Path   string // a net/http ServeMux path pattern; "{name}" segments fill input fields
	rpc    bool
	event  string // OnEvent: the event name
	intern bool   // Internal: no route
	// webhook dedupe
	dedupeField string
	dedupeTTL   string
	sched       *schedule // Cron
	badOpt      string    // a Cron option (In, CatchUp) used on another binding
}

// POST binds a flow to POST path.
func POST(path string) Binding { return Binding{Method: http.MethodPost, Path: path} }

// PUT binds a flow to PUT path.
func PUT(path string) Binding { return Binding{Method: http.MethodPut, Path: path} }

// PATCH binds a flow to PATCH path.
func PATCH(path string) Binding { return Binding{Method: http.MethodPatch, Path: path} }

// DELETE binds a flow to DELETE path.
func DELETE(path string) Binding { return Binding{Method: http.MethodDelete, Path: path} }

// QUERY binds a flow to the QUERY method (a safe method with a body). QUERY
// is not GET: it honors an Idempotency-Key when the flow qualifies.
func QUERY(path string) Binding { return Binding{Method: "QUERY", Path: path} }

// GET binds a flow to GET path (and HEAD). Its input comes from path
// parameters and the query string. GET never honors an Idempotency-Key.
func GET(path string) Binding { return Binding{Method: http.MethodGet, Path: path} }

// RPC binds a flow to POST /rpc/{flow name}, with a JSON body. It honors an
// Idempotency-Key like any POST.
func RPC() Binding { return Binding{Method: http.MethodPost, rpc: true} }

// OnEvent binds a flow to an event: every event of that name emitted with
// Fx.Emit starts a journal run of the flow, with the event's payload as its
// input. Delivery is at least once; an event emitted inside a step, or with
// an EventID, starts its runs exactly once. Needs a driver with a journal.
func OnEvent(name string) Binding { return Binding{event: name} }

// Internal makes a flow known to the app without a route, so that Run can
// start it and the scheduler can pick its runs up after a restart.
func Internal() Binding { return Binding{intern: true} }

// DefaultDedupeTTL is how long a webhook's dedupe key is remembered.
const DefaultDedupeTTL = "30d"

// Webhook binds a flow to POST path for a provider's callbacks. Providers do
// not send Idempotency-Key, so the header is ignored; instead the value of
// the payload's field dedupeField (a top-level JSON field, or a dotted path
// such as "data.id") is the dedupe key: the first delivery runs the flow and
// stores its response; a later delivery with the same value replays it and
// does nothing, whatever the rest of the payload says. The key is kept for
// DefaultDedupeTTL; change it with DedupeTTL.
func Webhook(path, dedupeField string) Binding {
	return Binding{Method: http.MethodPost, Path: path, dedupeField: dedupeField, dedupeTTL: DefaultDedupeTTL}
}

// DedupeTTL returns a copy of a Webhook binding that remembers dedupe keys
// for ttl (a positive integer and one of ms, s, m, h, d).
func (b Binding) DedupeTTL(ttl string) Binding {
	b.dedupeTTL = ttl
	return b
}

// routeless reports whether the binding has no HTTP route (OnEvent,
// Internal, Cron).
func (b Binding) routeless() bool { return b.event != "" || b.intern || b.sched != nil }

func (b Binding) pattern(flowName string) string {
	if b.routeless() {
		return b.String()
	}
	path := b.Path
	if b.rpc {
		path = "/rpc/" + flowName
	}
	return b.Method + " " + path
}

func (b Binding) String() string {
	switch {
	case b.rpc:
		return "RPC"
	case b.event != "":
		return "event " + b.event
	case b.intern:
		return "internal"
	case b.sched != nil:
		return b.sched.String()
	}
	return b.Method + " " + b.Path
}

// pathParams returns the names of the {name} segments of path.
func pathParams(path string) ([]string, error) {
	var names []string
	for _, seg := range strings.Split(path, "/") {
		if !strings.HasPrefix(seg, "{") {
			continue
		}
		if !strings.HasSuffix(seg, "}") {
			return nil, fmt.Errorf("path %q: segment %q: a parameter must be a whole segment, like {id}", path, seg)
		}
		name := strings.TrimSuffix(strings.TrimSuffix(seg[1:len(seg)-1], "..."), "$")
		if name != "" {
			names = append(names, name)
		}
	}
	return names, nil
}
