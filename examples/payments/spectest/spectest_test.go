// Package spectest checks that the demo's OpenAPI document
// (examples/payments/openapi.json) tells the truth about the running demo:
// a property-based test (pgregory.net/rapid) draws requests from the
// document — valid ones, and ones made invalid in one way — sends them to
// the demo served on a real TCP listener (file driver, temp folder), and
// checks every answer against the document with kin-openapi's
// openapi3filter.ValidateResponse and rules of its own:
//
//   - no valid request is refused with 400 or 422;
//   - every invalid request is refused with the status the document gives
//     for it (400 for the input and the Idempotency-Key, 415 for a media
//     type the operation does not take, 401 for a bad credential);
//   - every status is documented for its operation (a `default` catch-all
//     does not count), every header the server sends is documented for
//     that status (but the framing headers Content-Length, Date,
//     Transfer-Encoding, Connection), every media type too, and the body
//     validates against the documented schema (an NDJSON body line by
//     line);
//   - a retry of an honored operation's 2xx answer with the same key and
//     body replays it (Idempotent-Replayed: true, the same status and
//     body), and the same key with another body is 422.
//
// kin-openapi's ValidateRequest checks the generator itself: a request it
// calls valid must pass it, and one it made invalid by the schema must
// fail it.
//
// The run is bounded: -rapid.checks checks per operation (default here
// 40, each a valid request, an invalid one and, for honored operations,
// a replay and a reuse), from -rapid.seed (random when 0; the seed is
// logged). Inputs that cost time are capped below their documented maximum
// (costs): the cap is tested by the invalid requests past the maximum
// instead. Nothing waits on a clock: every request is sent after the
// answer of the one before, and a stored answer's TTL shorter than a
// minute (demo.note's 2s) only relaxes the replay check to "either replay
// or run again".
//
// Of the ways a request can be made invalid, each check draws among
// those tried least so far, so that every way is tried once the checks
// outnumber them. TestDriveFindsEachLie runs the same checks against a
// small server that keeps a small document, and against versions of it
// that lie in one way each: no finding on the first, the lie on each other.
//
// Once per operation it also probes the headers the demo's gate reads
// (a bad Bearer token, a bad X-API-Key, a bad X-Tenant): a server that
// answers them must document them (security schemes, the X-Tenant
// parameter). Past the server's own limits it sends a 2 MiB body and
// 100 KiB of headers where the operation lists 413 and 431.
//
// Not covered, because they need two requests in flight at once (a
// timing the test does not rely on): 409 IdempotencyInProgress with
// Retry-After, and Preference-Applied after a Prefer: wait. A failure of
// the store (503) is not provoked either.
//
// Set OKE_SPECTEST_REPORT=FILE to have the findings written there as
// Markdown as well.
package spectest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"go.uber.org/goleak"
	"pgregory.net/rapid"

	"github.com/okengine/oke/examples/payments/app"
)

const specFile = "../openapi.json"

func TestMain(m *testing.M) {
	flag.Parse()
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !set["rapid.checks"] && os.Getenv("RAPID_CHECKS") == "" {
		flag.Set("rapid.checks", "40")
	}
	if !set["rapid.nofailfile"] && os.Getenv("RAPID_NOFAILFILE") == "" {
		flag.Set("rapid.nofailfile", "true") // no testdata/rapid folder in the repo
	}
	if f := flag.Lookup("rapid.seed"); f.Value.String() == "0" {
		flag.Set("rapid.seed", strconv.FormatUint(uint64(time.Now().UnixNano())|1, 10))
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on a successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// loadSpec loads and validates the demo's document.
func loadSpec(t *testing.T) *openapi3.T {
	t.Helper()
	b, err := os.ReadFile(specFile)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := openapi3.NewLoader().LoadFromData(b)
	if err != nil {
		t.Fatalf("kin-openapi cannot load %s: %v", specFile, err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("kin-openapi: %s is invalid: %v", specFile, err)
	}
	return doc
}

// startDemo opens the demo on the file driver in a temp folder and serves
// it on a real TCP listener (httptest, on 127.0.0.1) with the http.Server
// Run uses.
func startDemo(t *testing.T) string {
	t.Helper()
	cfg := app.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.AdminToken = "spectest-admin-token-0123456789ab"
	cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelError}))
	s, err := app.Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("open the demo: %v", err)
	}
	hs := httptest.NewUnstartedServer(nil)
	hs.Config = s.HTTPServer()
	hs.Start()
	t.Cleanup(func() {
		s.Shutdown()
		hs.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			t.Errorf("close the demo: %v", err)
		}
	})
	return hs.URL
}

// answer is what the demo answered.
type answer struct {
	status int
	header http.Header
	body   []byte
	live   bool // an SSE feed: only its first event was read
}

// hangGuard only stops a request that never ends from hanging the test;
// no check depends on it.
const hangGuard = 2 * time.Minute

var client = &http.Client{Timeout: hangGuard}

// send sends r and reads the answer: all of it, but for an SSE feed (it
// never ends), of which it reads the first event.
func send(t *rapid.T, base string, r *request) answer {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err := client.Do(r.httpRequest(base).WithContext(ctx))
	if err != nil {
		t.Fatalf("%s\n→ %v", r, err)
	}
	defer resp.Body.Close()
	a := answer{status: resp.StatusCode, header: resp.Header}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "text/event-stream" {
		a.live = true
		br := bufio.NewReader(resp.Body)
		for {
			line, err := br.ReadString('\n')
			a.body = append(a.body, line...)
			if err != nil || line == "\n" {
				break
			}
		}
		return a
	}
	if a.body, err = io.ReadAll(resp.Body); err != nil {
		t.Fatalf("%s\n→ read the body: %v", r, err)
	}
	return a
}

func (a answer) String() string {
	b := a.body
	if len(b) > 400 {
		b = append(b[:400:400], "…"...)
	}
	var hs []string
	for _, k := range sortedKeys(a.header) {
		if !framing[k] || k == "Content-Type" {
			hs = append(hs, k+": "+strings.Join(a.header[k], ", "))
		}
	}
	return fmt.Sprintf("%d %s\n%s\n\n%s", a.status, http.StatusText(a.status), strings.Join(hs, "\n"), bytes.TrimSpace(b))
}

// framing are the headers of HTTP's own message framing, which no API
// document lists. Content-Type is checked as the media type.
var framing = map[string]bool{"Content-Length": true, "Date": true, "Transfer-Encoding": true, "Connection": true, "Content-Type": true}

// A finding is one way the demo and its document disagree.
type finding struct {
	op      string
	key     string // what kind of disagreement, for grouping
	detail  string
	example string // the request and the answer
	n       int    // how many requests showed it
}

// findings collects the findings of a run, one per (operation, key), with
// the shortest example.
type findings struct {
	mu sync.Mutex
	m  map[string]*finding
}

func (f *findings) add(op *operation, key, detail string, r *request, a answer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[string]*finding{}
	}
	ex := "request:\n" + r.String() + "\n\nanswer:\n" + a.String()
	id := op.id + "\x00" + key
	if old, ok := f.m[id]; ok {
		old.n++
		if len(ex) < len(old.example) {
			old.example, old.detail = ex, detail
		}
		return
	}
	f.m[id] = &finding{op: op.method + " " + op.path + " (" + op.id + ")", key: key, detail: detail, example: ex, n: 1}
}

func (f *findings) list() []*finding {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]*finding, 0, len(f.m))
	for _, x := range f.m {
		out = append(out, x)
	}
	slices.SortFunc(out, func(a, b *finding) int { return strings.Compare(a.op+a.key, b.op+b.key) })
	return out
}

// counts are the numbers of one operation's run.
type counts struct{ valid, invalid, replays, reuses int }

// The demo answers every request its OpenAPI document allows, refuses every
// one it forbids, and says nothing the document does not (see the package
// doc).
func TestDemoFollowsItsOpenAPI(t *testing.T) {
	doc := loadSpec(t)
	base := startDemo(t)
	all, total := drive(t, doc, base)
	list := all.list()
	t.Logf("total: %d operations, %d valid requests, %d invalid, %d replays, %d reuses; %d findings",
		len(operations(doc)), total.valid, total.invalid, total.replays, total.reuses, len(list))
	for _, f := range list {
		t.Errorf("%s: %s (%d requests)\n%s\n", f.op, f.detail, f.n, indent(f.example))
	}
	if path := os.Getenv("OKE_SPECTEST_REPORT"); path != "" {
		writeReport(t, path, list)
	}
}

// drive runs the property checks of every operation of doc against the
// server at base, and returns what they found.
func drive(t *testing.T, doc *openapi3.T, base string) (*findings, counts) {
	g := &generator{doc: doc, pools: &pools{}}
	chk := &checker{doc: doc}
	all := &findings{}
	t.Logf("seed: -rapid.seed=%s, checks per operation: -rapid.checks=%s",
		flag.Lookup("rapid.seed").Value, flag.Lookup("rapid.checks").Value)
	var total counts
	for _, op := range operations(doc) {
		var n counts
		probed := false
		tried := map[string]int{}
		t.Run(op.id, func(t *testing.T) {
			rapid.Check(t, func(rt *rapid.T) {
				r := g.valid(rt, op)
				chk.selfCheck(rt, r)
				a := send(rt, base, r)
				n.valid++
				if !probed {
					probed = true
					chk.probe(all, rt, g, base, r)
				}
				chk.answer(all, r, a)
				if a.status == 400 || a.status == 422 {
					all.add(op, fmt.Sprintf("valid request refused %d %s", a.status, errorCode(a)),
						fmt.Sprintf("a request the document allows (kin-openapi's ValidateRequest passes it) was refused with %d %s", a.status, errorCode(a)), r, a)
				}
				g.pools.collect(op, a.status, a.body)
				if op.key != nil && r.header.Get(op.key.Name) != "" && a.status != 400 && a.status != 422 {
					n.replays++
					chk.replay(all, r, a, send(rt, base, r))
					if a.status < 200 || a.status > 299 {
						// Only a 2xx is surely stored (a failure before any
						// write is not): the retry's documentation is checked.
					} else if other := g.reused(rt, r); other != nil {
						n.reuses++
						chk.reuse(all, other, a, send(rt, base, other))
					}
				}
				if bad := g.invalid(rt, r, tried); bad != nil {
					chk.selfCheck(rt, bad)
					b := send(rt, base, bad)
					n.invalid++
					chk.answer(all, bad, b)
					// When the valid request it was made from was itself
					// refused (a finding above), a 400 says nothing about
					// this one: only its answer's documentation is checked.
					if refused := a.status == 400 || a.status == 422; b.status != bad.want && !(refused && b.status == 400) {
						all.add(op, fmt.Sprintf("invalid %s", bad.what),
							fmt.Sprintf("an invalid request (%s) was answered %d %s, not %d%s", bad.what, b.status, errorCode(b), bad.want, bad.whyBad), bad, b)
					}
				}
			})
		})
		t.Logf("%-22s %-6s %-26s valid %3d  invalid %3d  replays %3d  reuses %3d", op.id, op.method, op.path, n.valid, n.invalid, n.replays, n.reuses)
		total.valid += n.valid
		total.invalid += n.invalid
		total.replays += n.replays
		total.reuses += n.reuses
	}
	return all, total
}

func indent(s string) string { return "    " + strings.ReplaceAll(s, "\n", "\n    ") }

func writeReport(t *testing.T, path string, list []*finding) {
	var sb strings.Builder
	for _, f := range list {
		fmt.Fprintf(&sb, "### %s: %s\n\n%s (%d requests showed it). Example:\n\n```\n%s\n```\n\n", f.op, f.key, f.detail, f.n, f.example)
	}
	if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
		t.Error(err)
	}
}

// errorCode is the code of an error envelope, "" for another body.
func errorCode(a answer) string {
	var env struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	json.Unmarshal(a.body, &env)
	return env.Error.Code
}

// reused draws another valid body for r's operation, under r's key: nil
// when the operation has no body to change.
func (g *generator) reused(t *rapid.T, r *request) *request {
	if r.op.body == nil {
		return nil
	}
	for range 5 {
		o := g.valid(t, r.op)
		if !o.hasBody || bytes.Equal(o.bodyBytes(), r.bodyBytes()) {
			continue
		}
		c := r.clone()
		c.body, c.hasBody, c.raw = o.body, true, nil
		c.what = "the same key with another body"
		return c
	}
	return nil
}

// checker checks answers against the document.
type checker struct{ doc *openapi3.T }

// selfCheck makes sure kin-openapi agrees with the generator: a valid
// request passes ValidateRequest, one made invalid by the schema fails it.
func (c *checker) selfCheck(t *rapid.T, r *request) {
	defer func() {
		if r.schemaBad {
			r.whyBad = "; the document forbids it: kin-openapi's ValidateRequest says " + strings.ReplaceAll(r.whyBad, "\n", " | ")
		}
	}()
	req := r.httpRequest("http://spectest.invalid")
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: r.path, Route: r.op.route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true}}
	err := openapi3filter.ValidateRequest(context.Background(), in)
	switch {
	case r.what == "valid" && err != nil:
		t.Fatalf("the generator drew a request kin-openapi finds invalid (a bug of this test):\n%s\n→ %v", r, err)
	case r.schemaBad && err == nil:
		t.Fatalf("the generator made a request invalid (%s) that kin-openapi finds valid (a bug of this test):\n%s", r.what, r)
	case err != nil:
		why, _, _ := strings.Cut(err.Error(), "\nSchema:")
		r.whyBad = strings.TrimSpace(why)
	}
}

// answer checks one answer against the operation's documented responses.
func (c *checker) answer(f *findings, r *request, a answer) {
	op := r.op
	resp := op.op.Responses.Status(a.status)
	if resp == nil {
		how := fmt.Sprintf("is not documented (the operation lists %s)", strings.Join(sortedKeys(op.op.Responses.Map()), ", "))
		if d := op.op.Responses.Default(); d != nil {
			how = "is documented only by the `default` catch-all"
		}
		f.add(op, fmt.Sprintf("status %d %s", a.status, errorCode(a)), fmt.Sprintf("status %d (%s) %s", a.status, errorCode(a), how), r, a)
		if resp = op.op.Responses.Default(); resp == nil {
			return
		}
	}
	ct := a.header.Get("Content-Type")
	mt, _, _ := mime.ParseMediaType(ct)
	stream := mt == "application/x-ndjson" || a.live
	req := r.httpRequest("http://spectest.invalid")
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: r.path, Route: op.route},
		Status:                 a.status,
		Header:                 a.header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true, ExcludeResponseBody: stream},
	}
	in.SetBodyBytes(a.body)
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		reason := err.Error()
		if re, ok := err.(*openapi3filter.ResponseError); ok {
			reason = re.Reason
		}
		f.add(op, fmt.Sprintf("status %d: %s", a.status, reason), fmt.Sprintf("the %d answer does not match the document: %v", a.status, err), r, a)
	}
	for _, h := range sortedKeys(a.header) {
		if framing[h] {
			continue
		}
		if !documentedHeader(resp.Value, h) {
			f.add(op, fmt.Sprintf("status %d header %s", a.status, h), fmt.Sprintf("the %d answer has header %s: %s, which the document does not list for %d", a.status, h, a.header.Get(h), a.status), r, a)
		}
	}
	if len(resp.Value.Content) == 0 && (len(a.body) > 0 || ct != "") {
		f.add(op, fmt.Sprintf("status %d media type %s", a.status, mt), fmt.Sprintf("the %d answer has a %s body, where the document gives %d no content", a.status, ct, a.status), r, a)
	}
	if stream && resp.Value.Content.Get(ct) == nil && len(resp.Value.Content) > 0 {
		f.add(op, fmt.Sprintf("status %d media type %s", a.status, mt), fmt.Sprintf("the %d answer is %s, which the document does not list (it lists %v)", a.status, ct, sortedKeys(resp.Value.Content)), r, a)
	}
	if mt == "application/x-ndjson" {
		// OpenAPI 3.1 gives a media type that is not JSON a schema of the
		// whole body as text ({"type":"string"}: nothing more to check);
		// any other schema is read as that of each line.
		if m := resp.Value.Content.Get(ct); m != nil && m.Schema != nil && !m.Schema.Value.Type.Is("string") {
			for i, line := range bytes.Split(bytes.TrimSpace(a.body), []byte("\n")) {
				var v any
				if err := json.Unmarshal(line, &v); err != nil {
					f.add(op, fmt.Sprintf("status %d NDJSON", a.status), fmt.Sprintf("line %d of the NDJSON body is not JSON: %v", i+1, err), r, a)
					break
				}
				if err := m.Schema.Value.VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
					f.add(op, fmt.Sprintf("status %d NDJSON schema", a.status), fmt.Sprintf("line %d of the NDJSON body does not match the schema: %v", i+1, err), r, a)
					break
				}
			}
		}
	}
}

func documentedHeader(resp *openapi3.Response, h string) bool {
	for name := range resp.Headers {
		if strings.EqualFold(name, h) {
			return true
		}
	}
	return false
}

// replay checks that the same request under the same key got first's
// answer back, replayed.
func (c *checker) replay(f *findings, r *request, first, again answer) {
	c.answer(f, r, again)
	replayed := again.header.Get("Idempotent-Replayed") == "true"
	if r.op.ttl > 0 && r.op.ttl < time.Minute && !replayed {
		return // the stored answer may have expired: a fresh run is right too
	}
	if (first.status < 200 || first.status > 299) && !replayed {
		return // not stored (a failure before any write): it ran again
	}
	if again.status != first.status || !bytes.Equal(again.body, first.body) || again.header.Get("Idempotent-Replayed") != "true" {
		f.add(r.op, "replay", fmt.Sprintf("a retry with the same Idempotency-Key and body was answered %d (Idempotent-Replayed: %q), not the first answer %d replayed",
			again.status, again.header.Get("Idempotent-Replayed"), first.status), r, again)
	}
}

// reuse checks that another body under a used key is 422.
func (c *checker) reuse(f *findings, r *request, first, again answer) {
	c.answer(f, r, again)
	if r.op.ttl > 0 && r.op.ttl < time.Minute && again.status != 422 {
		return // the stored answer may have expired
	}
	if again.header.Get("Idempotent-Replayed") == "true" && again.status == first.status && bytes.Equal(again.body, first.body) {
		return // the other body is the same input once validated (a field at its zero value, "USD" for "usd")
	}
	if again.status != 422 {
		f.add(r.op, "reuse", fmt.Sprintf("the same Idempotency-Key with another body was answered %d %s, not 422 IdempotencyKeyReused", again.status, errorCode(again)), r, again)
	}
}

// probes are headers the demo's gate reads whatever the document says: a
// server that answers them (401 for a bad credential, 400 for a bad
// tenant) reads them, so the document must state them.
var probes = []struct {
	header, value string
	status        int
	documented    func(doc *openapi3.T, op *operation) bool
	want          string
}{
	{"Authorization", "Bearer bad", 401, bearer, "a security requirement with an http bearer scheme"},
	{"X-API-Key", "bad key", 401, apiKey("X-API-Key"), "a security requirement with an apiKey scheme in header X-API-Key"},
	{"X-Tenant", "bad tenant", 400, headerParam("X-Tenant"), "an X-Tenant header parameter"},
}

// probe sends r once with each probe header.
func (c *checker) probe(f *findings, t *rapid.T, g *generator, base string, r *request) {
	for _, p := range probes {
		pr := r.clone()
		pr.what = "probe " + p.header
		if k := r.op.key; k != nil && pr.header.Get(k.Name) != "" {
			pr.header.Set(k.Name, g.freshKey(t, k.Schema.Value))
		}
		pr.header.Set(p.header, p.value)
		a := send(t, base, pr)
		c.answer(f, pr, a)
		if a.status == p.status && !p.documented(c.doc, r.op) {
			f.add(r.op, "undocumented "+p.header, fmt.Sprintf("the server reads %s (%s: %s is answered %d %s), but the operation does not document it (expected: %s)", p.header, p.header, p.value, a.status, errorCode(a), p.want), pr, a)
		}
	}
}

func apiKey(name string) func(*openapi3.T, *operation) bool {
	return func(doc *openapi3.T, op *operation) bool {
		for _, req := range op.security {
			for s := range req {
				if ref := doc.Components.SecuritySchemes[s]; ref != nil && ref.Value != nil &&
					ref.Value.Type == "apiKey" && ref.Value.In == "header" && strings.EqualFold(ref.Value.Name, name) {
					return true
				}
			}
		}
		return false
	}
}

func headerParam(name string) func(*openapi3.T, *operation) bool {
	return func(_ *openapi3.T, op *operation) bool {
		for _, p := range op.params {
			if p.In == "header" && strings.EqualFold(p.Name, name) {
				return true
			}
		}
		return false
	}
}
