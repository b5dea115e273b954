package spectest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/routers"
	"pgregory.net/rapid"
)

// operation is one operation of the spec, with what the generator needs.
type operation struct {
	id, method, path string
	op               *openapi3.Operation
	route            *routers.Route
	params           []*openapi3.Parameter // the path item's and the operation's
	body             *openapi3.RequestBody // nil: the operation takes none
	bodyMedia        string                // its media type (application/json)
	bodySchema       *openapi3.Schema
	security         openapi3.SecurityRequirements
	key              *openapi3.Parameter // the Idempotency-Key parameter, if any
	ttl              time.Duration       // x-oke-idempotency's ttl, 0 when none
}

// operations lists the spec's operations, those that produce ids other
// operations use (links) first.
func operations(doc *openapi3.T) []*operation {
	var ops []*operation
	for _, path := range doc.Paths.InMatchingOrder() {
		item := doc.Paths.Value(path)
		for method, op := range item.Operations() {
			o := &operation{id: op.OperationID, method: method, path: path, op: op,
				route: &routers.Route{Spec: doc, Path: path, PathItem: item, Method: method, Operation: op}}
			for _, p := range append(slices.Clone(item.Parameters), op.Parameters...) {
				o.params = append(o.params, p.Value)
				if p.Value.In == "header" && http.CanonicalHeaderKey(p.Value.Name) == "Idempotency-Key" {
					o.key = p.Value
				}
			}
			if op.RequestBody != nil {
				o.body = op.RequestBody.Value
				for _, mt := range sortedKeys(o.body.Content) {
					o.bodyMedia, o.bodySchema = mt, o.body.Content[mt].Schema.Value
					if mt == "application/json" {
						break
					}
				}
			}
			o.security = doc.Security
			if op.Security != nil {
				o.security = *op.Security
			}
			if x, ok := op.Extensions["x-oke-idempotency"].(map[string]any); ok {
				if s, ok := x["ttl"].(string); ok {
					o.ttl, _ = time.ParseDuration(s)
				}
			}
			ops = append(ops, o)
		}
	}
	rank := func(o *operation) int {
		for i, l := range links {
			if l.from == o.id {
				return i
			}
		}
		return len(links)
	}
	slices.SortStableFunc(ops, func(a, b *operation) int {
		if c := rank(a) - rank(b); c != 0 {
			return c
		}
		return strings.Compare(a.path+" "+a.method, b.path+" "+b.method)
	})
	return ops
}

// A link feeds a value from one operation's answers into another's
// requests, as OpenAPI links would: a refund of a charge that exists, a
// charge read by its id. Without them every such request would be a 404.
type link struct {
	from  string // the operation whose 2xx answers hold the value
	field string // the answer's property
	pool  string
}

var links = []link{
	{"payments.charge", "id", "charge"},
	{"payments.refund", "id", "refund"},
	{"demo.pipeline", "tag", "tag"},
}

// uses names, per operation, the inputs drawn (half the time) from a pool:
// "body/FIELD" or "path/NAME".
var uses = map[string]map[string]string{
	"payments.refund":    {"body/chargeId": "charge"},
	"payments.get":       {"path/id": "charge"},
	"payments.getRefund": {"path/id": "refund"},
	"demo.pipelineLog":   {"path/tag": "tag"},
}

// costs caps the valid values of inputs that cost time (see caps).
var costs = map[string]caps{
	"demo.slow":     {"/ms": 20},
	"demo.pipeline": {"/steps": 3, "/stepMs": 5},
	"demo.export":   {"/lines": 3, "/delayMs": 5},
}

// pools holds the values links collected.
type pools struct {
	mu sync.Mutex
	m  map[string][]string
}

func (p *pools) add(pool, v string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[string][]string{}
	}
	if len(p.m[pool]) < 200 && !slices.Contains(p.m[pool], v) {
		p.m[pool] = append(p.m[pool], v)
	}
}

func (p *pools) get(pool string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.m[pool])
}

// collect adds the linked values of an operation's 2xx answer.
func (p *pools) collect(op *operation, status int, body []byte) {
	if status < 200 || status > 299 {
		return
	}
	var v map[string]any
	if json.Unmarshal(body, &v) != nil {
		return
	}
	for _, l := range links {
		if l.from == op.id {
			if s, ok := v[l.field].(string); ok && s != "" {
				p.add(l.pool, s)
			}
		}
	}
}

// request is one request of the test, before it is encoded.
type request struct {
	op          *operation
	path        map[string]string
	query       url.Values
	header      http.Header
	body        any  // the JSON value of the body
	hasBody     bool // false: no body at all
	raw         []byte
	contentType string
	what        string // "valid", or how the request was made invalid
	want        int    // for an invalid request: the status it must get
	schemaBad   bool   // the spec itself says the request is invalid (kin-openapi must agree)
	whyBad      string // what kin-openapi says is wrong with it
}

func (r *request) clone() *request {
	c := *r
	c.path = maps(r.path)
	c.query = url.Values{}
	for k, v := range r.query {
		c.query[k] = slices.Clone(v)
	}
	c.header = r.header.Clone()
	c.body = deepCopy(r.body)
	c.raw = slices.Clone(r.raw)
	return &c
}

func maps(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = deepCopy(e)
		}
		return out
	}
	return v
}

// bodyBytes is the encoded body.
func (r *request) bodyBytes() []byte {
	if !r.hasBody {
		return nil
	}
	if r.raw != nil {
		return r.raw
	}
	b, err := json.Marshal(r.body)
	if err != nil {
		panic(err)
	}
	return b
}

// target is the request's path and query.
func (r *request) target() string {
	p := r.op.path
	for name, v := range r.path {
		p = strings.ReplaceAll(p, "{"+name+"}", url.PathEscape(v))
	}
	if q := r.query.Encode(); q != "" {
		p += "?" + q
	}
	return p
}

// httpRequest builds the request to send to base.
func (r *request) httpRequest(base string) *http.Request {
	b := r.bodyBytes()
	var req *http.Request
	var err error
	if r.hasBody {
		req, err = http.NewRequest(r.op.method, base+r.target(), bytes.NewReader(b))
	} else {
		req, err = http.NewRequest(r.op.method, base+r.target(), nil)
	}
	if err != nil {
		panic(err)
	}
	req.Header = r.header.Clone()
	if r.hasBody && r.contentType != "" {
		req.Header.Set("Content-Type", r.contentType)
	}
	return req
}

// String shows the request as a finding quotes it.
func (r *request) String() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s %s", r.op.method, r.target())
	for _, k := range sortedKeys(r.header) {
		v := strings.Join(r.header[k], ", ")
		if len(v) > 200 {
			v = fmt.Sprintf("%s… (%d bytes)", v[:200], len(v))
		}
		fmt.Fprintf(&sb, "\n%s: %s", k, v)
	}
	if r.hasBody {
		if r.contentType != "" {
			fmt.Fprintf(&sb, "\nContent-Type: %s", r.contentType)
		}
		b := r.bodyBytes()
		if len(b) > 300 {
			b = append(b[:300:300], "…"...)
		}
		fmt.Fprintf(&sb, "\n\n%s", b)
	}
	return sb.String()
}

// generator draws requests for the operations of one spec.
type generator struct {
	doc   *openapi3.T
	pools *pools
	mu    sync.Mutex
	keyN  int
	keys  map[string]bool
}

// principals are the credentials the test holds: the demo's gate takes
// "Bearer user:<id>" and "X-API-Key: <id>" (the spec says which schemes
// exist; what a valid credential is, as for any API, the caller knows).
var principals = []string{"alice", "bob"}

// valid draws a request the spec allows.
func (g *generator) valid(t *rapid.T, op *operation) *request {
	r := &request{op: op, path: map[string]string{}, query: url.Values{}, header: http.Header{}, what: "valid"}
	g.credentials(t, op, r)
	for _, p := range op.params {
		if p == op.key {
			if p.Required || rapid.IntRange(0, 3).Draw(t, "send key") > 0 {
				r.header.Set(p.Name, g.freshKey(t, p.Schema.Value))
			}
			continue
		}
		if !p.Required && p.In != "path" && !rapid.Bool().Draw(t, p.Name+"#present") {
			continue
		}
		v := g.paramValue(t, op, p)
		switch p.In {
		case "path":
			r.path[p.Name] = v
		case "query":
			r.query.Set(p.Name, v)
		case "header":
			r.header.Set(p.Name, v)
		}
	}
	if op.body != nil && (op.body.Required || rapid.IntRange(0, 5).Draw(t, "send body") > 0) {
		r.hasBody, r.contentType = true, op.bodyMedia
		r.body = gen(t, op.bodySchema, "", costs[op.id])
		if obj, ok := r.body.(map[string]any); ok {
			for _, use := range sortedKeys(uses[op.id]) {
				pool := uses[op.id][use]
				field, ok := strings.CutPrefix(use, "body/")
				if !ok {
					continue
				}
				if vs := g.pools.get(pool); len(vs) > 0 && rapid.Bool().Draw(t, use+"#linked") {
					v := rapid.SampledFrom(vs).Draw(t, use)
					if ps := op.bodySchema.Properties[field]; ps != nil && ps.Value.VisitJSON(v, openapi3.EnableJSONSchema2020()) == nil {
						obj[field] = v
					}
				}
			}
		}
	}
	return r
}

// credentials adds what one of the operation's security requirements asks
// for (none when the spec states none, or allows {}).
func (g *generator) credentials(t *rapid.T, op *operation, r *request) {
	if len(op.security) == 0 {
		return
	}
	req := op.security[rapid.IntRange(0, len(op.security)-1).Draw(t, "security")]
	who := rapid.SampledFrom(principals).Draw(t, "principal")
	for _, name := range sortedKeys(req) {
		ref := g.doc.Components.SecuritySchemes[name]
		if ref == nil || ref.Value == nil {
			panic("security scheme " + name + " is not in components")
		}
		s := ref.Value
		switch {
		case s.Type == "http" && strings.EqualFold(s.Scheme, "bearer"):
			r.header.Set("Authorization", "Bearer user:"+who)
		case s.Type == "apiKey" && s.In == "header":
			r.header.Set(s.Name, who)
		default:
			panic(fmt.Sprintf("security scheme %s: type %s (%s in %s) is not one the demo's gate takes", name, s.Type, s.Scheme, s.In))
		}
	}
}

// freshKey draws an Idempotency-Key from its schema that no request of the
// run has used: characters in its middle are replaced with a counter when
// the result still matches the schema (its ends stay as drawn: a key that
// starts or ends with a space is one the schema may allow).
func (g *generator) freshKey(t *rapid.T, s *openapi3.Schema) string {
	k := genString(t, s, "Idempotency-Key")
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.keys == nil {
		g.keys = map[string]bool{}
	}
	g.keyN++
	if n := fmt.Sprintf("%08x", g.keyN); len(k) >= len(n)+2 {
		i := (len(k) - len(n)) / 2
		if u := k[:i] + n + k[i+len(n):]; s.VisitJSON(u, openapi3.EnableJSONSchema2020()) == nil {
			k = u
		}
	}
	if g.keys[k] {
		t.Skipf("Idempotency-Key %q drawn twice", k)
	}
	g.keys[k] = true
	return k
}

// paramValue draws a parameter's value as text.
func (g *generator) paramValue(t *rapid.T, op *operation, p *openapi3.Parameter) string {
	if pool, ok := uses[op.id][p.In+"/"+p.Name]; ok {
		if vs := g.pools.get(pool); len(vs) > 0 && rapid.Bool().Draw(t, p.Name+"#linked") {
			v := rapid.SampledFrom(vs).Draw(t, p.Name)
			if p.Schema.Value.VisitJSON(v, openapi3.EnableJSONSchema2020()) == nil {
				return v
			}
		}
	}
	v := text(gen(t, p.Schema.Value, p.Name, costs[op.id]))
	switch p.In {
	case "path":
		// An empty segment, "." or ".." is not a segment's value (RFC 3986
		// removes dot segments; the router never sees them).
		if v == "" || v == "." || v == ".." {
			t.Skipf("path parameter %s = %q", p.Name, v)
		}
	case "header":
		if !carriable(v) {
			t.Skipf("header %s = %q cannot be sent in HTTP", p.Name, v)
		}
	}
	return v
}

// carriable reports whether an HTTP field value can hold v: no control
// characters but tab.
func carriable(v string) bool {
	for i := 0; i < len(v); i++ {
		if (v[i] < ' ' && v[i] != '\t') || v[i] == 0x7f {
			return false
		}
	}
	return true
}

// text is a parameter value as it is sent.
func text(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	case nil:
		return ""
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// invalid draws one way to make the valid request r invalid, and the
// status the spec then promises: 400 for the input and the key, 415 for a
// media type the operation does not take, 401 for a bad credential. Of the
// ways r can be broken it draws among those tried least so far (tried
// counts them), so that a run of as many checks as there are ways tries
// each.
func (g *generator) invalid(t *rapid.T, r *request, tried map[string]int) *request {
	op := r.op
	var ways []func() *request
	var names []string
	add := func(want int, schemaBad bool, what string, edit func(*request)) {
		names = append(names, what)
		ways = append(ways, func() *request {
			c := r.clone()
			c.what, c.want, c.schemaBad = what, want, schemaBad
			if k := op.key; k != nil && c.header.Get(k.Name) != "" {
				// A key of its own: under the valid request's key, another
				// body is 422 whatever else is wrong with it.
				c.header.Set(k.Name, g.freshKey(t, k.Schema.Value))
			}
			edit(c)
			return c
		})
	}
	if op.body != nil {
		if op.body.Required {
			add(400, true, "no body, where the body is required", func(c *request) { c.hasBody, c.body, c.raw = false, nil, nil })
		}
		add(400, true, "malformed JSON", func(c *request) { c.hasBody, c.raw, c.contentType = true, []byte(`{"`), op.bodyMedia })
		add(400, true, "a JSON array where the body is an object", func(c *request) {
			c.hasBody, c.body, c.raw, c.contentType = true, []any{}, nil, op.bodyMedia
		})
		if r.hasBody {
			add(415, true, "Content-Type text/plain", func(c *request) { c.contentType = "text/plain" })
		}
		if obj, ok := r.body.(map[string]any); ok && r.hasBody {
			s := op.bodySchema
			for _, name := range s.Required {
				add(400, true, "required field "+name+" dropped", func(c *request) { delete(c.body.(map[string]any), name) })
			}
			if ap := s.AdditionalProperties.Has; ap != nil && !*ap {
				add(400, true, "unknown field zzUnknown added (additionalProperties: false)", func(c *request) { c.body.(map[string]any)["zzUnknown"] = 1.0 })
				for _, name := range sortedKeys(obj) {
					if up := strings.ToUpper(name); up != name {
						add(400, true, fmt.Sprintf("field %s sent as %s (additionalProperties: false)", name, up), func(c *request) {
							m := c.body.(map[string]any)
							m[up] = m[name]
							delete(m, name)
						})
					}
				}
			}
			for _, name := range sortedKeys(obj) {
				if ps := s.Properties[name]; ps != nil {
					for _, b := range breakings(t, ps.Value, "/"+name) {
						add(400, true, b.what, func(c *request) { c.body.(map[string]any)[name] = b.value })
					}
				}
				add(400, false, "field "+name+" sent twice (a duplicated JSON key)", func(c *request) {
					v, _ := json.Marshal(obj[name])
					k, _ := json.Marshal(name)
					enc, _ := json.Marshal(obj)
					c.raw = append([]byte("{"+string(k)+":"+string(v)+","), enc[1:]...)
				})
			}
		}
	}
	if k := op.key; k != nil {
		if k.Required {
			add(400, true, "no Idempotency-Key, where it is required", func(c *request) { c.header.Del(k.Name) })
		}
		for _, b := range breakings(t, k.Schema.Value, "Idempotency-Key") {
			if v, ok := b.value.(string); ok && carriable(v) && strings.TrimSpace(v) == v && v != "" {
				add(400, true, b.what, func(c *request) { c.header.Set(k.Name, v) })
			}
		}
		add(400, true, "Idempotency-Key with a non-ASCII character", func(c *request) { c.header.Set(k.Name, "0123456789abcdeé") })
	}
	for _, p := range op.params {
		if p == op.key || strings.EqualFold(p.Name, "Prefer") {
			// Prefer: RFC 7240 says a server ignores a preference it does
			// not know, so no value of it is invalid.
			continue
		}
		for _, v := range paramBreakings(t, p) {
			add(400, true, fmt.Sprintf("%s parameter %s = %q (%s)", p.In, p.Name, v.value, v.what), func(c *request) {
				s := v.value.(string)
				switch p.In {
				case "path":
					c.path[p.Name] = s
				case "query":
					c.query.Set(p.Name, s)
				case "header":
					c.header.Set(p.Name, s)
				}
			})
		}
	}
	// Past the server's own limits (the document lists the status, not
	// the limit): a body of 2 MiB (oke's default limit is 1 MiB), headers
	// of 100 KiB (the demo's MaxHeaderBytes is 64 KiB).
	if op.body != nil && op.op.Responses.Status(413) != nil {
		add(413, false, "a 2 MiB body", func(c *request) {
			c.hasBody, c.contentType = true, op.bodyMedia
			c.raw = []byte(`{"pad":"` + strings.Repeat("x", 2<<20) + `"}`)
		})
	}
	if op.op.Responses.Status(431) != nil {
		add(431, false, "100 KiB of headers", func(c *request) { c.header.Set("X-Pad", strings.Repeat("x", 100<<10)) })
	}
	if bearer(g.doc, op) {
		add(401, false, "Authorization: Bearer bad", func(c *request) { c.header.Set("Authorization", "Bearer bad") })
	}
	if len(ways) == 0 {
		return nil
	}
	least := -1
	var pick []int
	for i, name := range names {
		switch n := tried[name]; {
		case least < 0 || n < least:
			least, pick = n, []int{i}
		case n == least:
			pick = append(pick, i)
		}
	}
	i := pick[rapid.IntRange(0, len(pick)-1).Draw(t, "invalid")]
	tried[names[i]]++
	return ways[i]()
}

// paramBreakings are the invalid text values of a parameter.
func paramBreakings(t *rapid.T, p *openapi3.Parameter) []breaking {
	s := p.Schema.Value
	var out []breaking
	if s.Type.Includes("integer") || s.Type.Includes("number") {
		out = append(out, breaking{"not a number", "x"})
		if s.Type.Includes("integer") && !s.Type.Includes("number") {
			out = append(out, breaking{"not an integer", "1.5"})
		}
	}
	for _, b := range breakings(t, s, p.Name) {
		switch v := b.value.(type) {
		case string:
			if !s.Type.Includes("string") {
				continue // a wrong type is text all the same in a parameter
			}
			if p.In == "path" && (v == "" || v == "." || v == "..") {
				continue
			}
			if p.In == "header" && (!carriable(v) || strings.TrimSpace(v) != v || v == "") {
				continue
			}
			out = append(out, breaking{b.what, v})
		case float64:
			if s.Type.Includes("integer") || s.Type.Includes("number") {
				out = append(out, breaking{b.what, text(v)})
			}
		}
	}
	return out
}

// bearer reports whether the operation's security takes a bearer token.
func bearer(doc *openapi3.T, op *operation) bool {
	for _, req := range op.security {
		for name := range req {
			if s := doc.Components.SecuritySchemes[name]; s != nil && s.Value != nil &&
				s.Value.Type == "http" && strings.EqualFold(s.Value.Scheme, "bearer") {
				return true
			}
		}
	}
	return false
}
