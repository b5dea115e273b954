package extract_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// The fixture's flows (testdata/flows/flows.go), each with the effects and
// why extract must infer for it. "@N" stands for testdata/flows/flows.go:N.
func TestEffects(t *testing.T) {
	cases := []struct {
		name    string
		effects []string
		why     map[string][]string
		honored []bool // per binding, in the contract's order
		txOnly  bool
		steps   []string
	}{
		{"fixture.deep", []string{"write"}, map[string][]string{
			"write": {"@44 levelOne → @29 levelTwo → @33 levelThree → @37 st.Exec INSERT INTO items (name) VALUES ($1)"},
		}, []bool{true}, false, nil},
		{"fixture.methodValue", []string{"send"}, map[string][]string{
			"send": {"@61 send → @52 notify → @53 fx.Send"},
		}, []bool{true}, false, nil},
		{"fixture.closure", []string{"emit"}, map[string][]string{
			"emit": {`@70 emit → @68 fx.Emit "closure.done"`},
		}, []bool{true}, false, nil},
		{"fixture.callee", []string{"write"}, map[string][]string{
			"write": {"@76 fx.Store(db).Exec UPDATE items SET n = n + 1 WHERE id = $1"},
		}, []bool{true, false}, false, nil}, // RPC honors, the webhook does not
		{"fixture.caller", []string{"write", "call"}, map[string][]string{
			"call":  {"@82 oke.Call fixture.callee"},
			"write": {"@82 oke.Call fixture.callee → @76 fx.Store(db).Exec UPDATE items SET n = n + 1 WHERE id = $1"},
		}, []bool{true, false}, false, nil}, // DELETE honors, Internal does not
		{"fixture.stepped", []string{"fetch"}, map[string][]string{
			"fetch": {`@93 oke.Step "call provider" → @98 fx.Fetch`},
		}, []bool{true}, false, []string{"draw id", "call provider"}},
		{"fixture.readOnly", []string{"read"}, map[string][]string{
			"read": {"@112 fx.Store(db).QueryRow SELECT count(*) FROM items WHERE id = $1"},
		}, []bool{false}, false, nil}, // a read-only POST ignores the header
		{"fixture.secretsOnly", []string{"secrets"}, map[string][]string{
			"secrets": {"@119 fx.Secret"},
		}, []bool{false}, false, nil}, // secrets alone do not qualify
		{"fixture.export", []string{"write"}, map[string][]string{
			"write": {"@126 fx.Store(db).Exec INSERT INTO exports (id) VALUES ($1)"},
		}, []bool{false}, false, nil}, // a stream never honors the header
		{"fixture.feed", []string{}, map[string][]string{}, []bool{false}, false, nil}, // send is not an effect
		{"fixture.dynamic", []string{"read", "write"}, map[string][]string{
			"read":  {"@145 st.Query SELECT id FROM items"},
			"write": {"@148 st.Query with SQL computed at run time (counts as a write)"},
		}, []bool{true}, false, nil},
		{"fixture.dialect", []string{"read"}, map[string][]string{
			"read": {"@159 fx.Store(db).Query SELECT id FROM items ORDER BY rowid", "@159 fx.Store(db).Query SELECT id FROM items ORDER BY seq"},
		}, []bool{false}, false, nil},
		{"fixture.read", []string{"read"}, map[string][]string{ // built in a helper, bound in a loop
			"read": {"@167 fx.Store(db).Query SELECT * FROM items WHERE id = $1"},
		}, []bool{false, false}, false, nil},
		{"fixture.readOther", []string{"read"}, map[string][]string{ // the same helper, another name
			"read": {"@167 fx.Store(db).Query SELECT * FROM items WHERE id = $1"},
		}, []bool{false}, false, nil},
		{"fixture.viaInterface", []string{"write"}, map[string][]string{
			"write": {"@186 conservative: passes fx to the interface method flows.Notifier.Notify, which extract cannot see into"},
		}, []bool{true}, false, nil},
		{"fixture.txOnly", []string{"read", "write"}, map[string][]string{
			"read":  {"@194 fx.Store(db).QueryRow SELECT 1"},
			"write": {"@201 fx.Tx → tx.Exec INSERT INTO items (id) VALUES ($1)"},
		}, []bool{true}, true, nil},
		{"fixture.misc", []string{"write", "call", "fetch", "ask", "embed", "raw"}, map[string][]string{
			"raw":   {`@211 fx.Raw "publish"`},
			"ask":   {"@214 fx.Ask"},
			"embed": {"@217 fx.Embed"},
			"fetch": {"@220 fx.HTTPClient"},
			"write": {"@221 fx.Store(db).Tx → @222 Store.Tx → tx.Exec DELETE FROM items WHERE id = $1"},
			"call":  {"@232 oke.Step stepName(i) → @233 oke.Run fixture.callee"}, // the run's own effects are not the caller's
		}, []bool{false}, false, nil},
		{"fixture.shapes", []string{"emit"}, map[string][]string{ // schema.go: options from a function
			"emit": {`extract/testdata/flows/schema.go:54 fx.Emit "shapes"`},
		}, []bool{true}, false, nil},
		{"fixture.generic", []string{"emit"}, map[string][]string{ // schema.go: a generic helper, options in a variable (Off)
			"emit": {`extract/testdata/flows/schema.go:63 fx.Emit`},
		}, []bool{false}, false, nil},
		{"fixture.hooked", []string{"write"}, map[string][]string{ // conservative.go
			"write": {
				"extract/testdata/flows/conservative.go:19 conservative: passes fx to context.WithValue, whose source extract does not read",
				"extract/testdata/flows/conservative.go:20 conservative: passes fx to a function value from elsewhere (hook), which extract cannot see into",
			},
		}, []bool{true}, false, nil},
	}
	res := run(t, "./testdata/flows")
	if len(res.Diagnostics) > 0 {
		t.Fatalf("the fixture breaks rules: %v", res.Diagnostics)
	}
	if len(res.Contract.Flows) != len(cases) {
		t.Errorf("%d flows, want %d", len(res.Contract.Flows), len(cases))
	}
	const file = "extract/testdata/flows/flows.go:"
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := flowNamed(t, res, tc.name)
			if !reflect.DeepEqual(f.Effects, tc.effects) {
				t.Errorf("effects %q, want %q", f.Effects, tc.effects)
			}
			want := map[string][]string{}
			for e, ws := range tc.why {
				for _, w := range ws {
					if strings.HasPrefix(w, "@") {
						w = strings.ReplaceAll(w, "@", file)
					}
					want[e] = append(want[e], w)
				}
			}
			if !reflect.DeepEqual(f.Why, want) {
				t.Errorf("why:\n%s\nwant:\n%s", jsonString(f.Why), jsonString(want))
			}
			var honored []bool
			for _, b := range f.Bindings {
				honored = append(honored, b.Honored)
			}
			if !reflect.DeepEqual(honored, tc.honored) {
				t.Errorf("honored %v, want %v (bindings %s)", honored, tc.honored, jsonString(f.Bindings))
			}
			if f.TxOnly != tc.txOnly {
				t.Errorf("txOnly %v, want %v", f.TxOnly, tc.txOnly)
			}
			steps := tc.steps
			if steps == nil {
				steps = []string{}
			}
			if !reflect.DeepEqual(f.Steps, steps) {
				t.Errorf("steps %q, want %q", f.Steps, steps)
			}
		})
	}
}

// Bindings: every constructor, each with its method, path, event and
// dedupe field, including two made in a loop over constant paths.
func TestBindings(t *testing.T) {
	res := run(t, "./testdata/flows")
	got := map[string][]string{}
	for _, f := range res.Contract.Flows {
		for _, b := range f.Bindings {
			got[f.Name] = append(got[f.Name], fmt.Sprintf("%s %s %s %s %s %s", b.Kind, b.Method, b.Path, b.Event, b.Dedupe, b.DedupeTTL))
		}
	}
	want := map[string][]string{
		"fixture.callee":       {"rpc POST    ", "webhook POST /hooks/provider  data.id 7d"},
		"fixture.caller":       {"http DELETE /caller/{id}   ", "internal     "},
		"fixture.closure":      {"http PATCH /closure   "},
		"fixture.deep":         {"http POST /deep   "},
		"fixture.dialect":      {"http GET /dialect   "},
		"fixture.dynamic":      {"http POST /dynamic   "},
		"fixture.export":       {"http POST /export   "},
		"fixture.feed":         {"http GET /feed   "},
		"fixture.methodValue":  {"http PUT /method-value/{id}   "},
		"fixture.misc":         {"event   item.changed  "},
		"fixture.read":         {"http GET /items/{id}   ", "http GET /things/{id}   "},
		"fixture.readOnly":     {"http POST /read-only   "},
		"fixture.readOther":    {"http GET /other/{id}   "},
		"fixture.secretsOnly":  {"http QUERY /secrets-only   "},
		"fixture.stepped":      {"http POST /stepped   "},
		"fixture.txOnly":       {"http POST /tx-only   "},
		"fixture.viaInterface": {"http POST /via-interface   "},
		"fixture.shapes":       {"http POST /shapes   "},
		"fixture.generic":      {"http POST /generic   "},
		"fixture.hooked":       {"http POST /hooked   "},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("bindings:\n%s\nwant:\n%s", jsonString(got), jsonString(want))
	}
}

// Options in the planned form of oke.Idempotency ({Mode, TTL, Claim}), read
// from a stand-in oke package (testdata/newapi/oke).
func TestOptionsPlannedIdempotencyForm(t *testing.T) {
	res := runIn(t, "testdata/newapi", ".")
	cases := []struct {
		flow, mode, ttl, claim string
		txOnly                 bool
	}{
		{"newapi.inTx", "required", "1h", "in_tx", true},  // Mode: a named constant; Claim: ClaimInTx as written
		{"newapi.auto", "required", "24h", "in_tx", true}, // oke.Required; ClaimAuto: in_tx because TxOnly
		{"newapi.first", "auto", "24h", "first", false},   // ClaimFirst as written
		{"newapi.off", "off", "24h", "", false},           // oke.Off: nothing honored, no claim
	}
	for _, tc := range cases {
		t.Run(tc.flow, func(t *testing.T) {
			f := flowNamed(t, res, tc.flow)
			if f.Idempotency.Mode != tc.mode || f.Idempotency.TTL != tc.ttl || f.Idempotency.Claim != tc.claim || f.TxOnly != tc.txOnly {
				t.Errorf("idempotency %+v txOnly %v, want {%s %s %s} %v", f.Idempotency, f.TxOnly, tc.mode, tc.ttl, tc.claim, tc.txOnly)
			}
		})
	}
	if len(res.Diagnostics)+len(res.Warnings) > 0 {
		t.Errorf("diagnostics %v, warnings %v", res.Diagnostics, res.Warnings)
	}
}

// Options read through a function that returns them, and through a package
// variable.
func TestOptionsSources(t *testing.T) {
	res := run(t, "./testdata/flows")
	shapes := flowNamed(t, res, "fixture.shapes")
	if shapes.Idempotency.Mode != "required" || shapes.Idempotency.TTL != "10m" || shapes.Description != "Echo shapes." {
		t.Errorf("fixture.shapes: %+v %q", shapes.Idempotency, shapes.Description)
	}
	if g := flowNamed(t, res, "fixture.generic"); g.Idempotency.Mode != "off" {
		t.Errorf("fixture.generic: %+v", g.Idempotency)
	}
	if m := flowNamed(t, res, "fixture.misc"); m.Idempotency.TTL != "1h" || !m.Durable {
		t.Errorf("fixture.misc: %+v durable %v", m.Idempotency, m.Durable)
	}
}

// Patches: a flow's oke.Patched and oke.DeprecatePatch names are listed as
// its patches, not as steps.
func TestPatchesAreListed(t *testing.T) {
	res := run(t, "./testdata/patches")
	if len(res.Diagnostics) > 0 {
		t.Fatalf("diagnostics: %v", res.Diagnostics)
	}
	f := flowNamed(t, res, "patches.ship")
	if !reflect.DeepEqual(f.Patches, []string{"express"}) || !reflect.DeepEqual(f.DeprecatedPatches, []string{"label-v2"}) {
		t.Errorf("patches %q, deprecated %q; want [express] and [label-v2]", f.Patches, f.DeprecatedPatches)
	}
	if !reflect.DeepEqual(f.Steps, []string{"label", "courier", "post"}) {
		t.Errorf("steps %q, want [label courier post]", f.Steps)
	}
}

// Steps that run at the same time (oke.Go, and every function of
// oke.First): their effects are the flow's, and their names its steps.
func TestParallelStepsEffects(t *testing.T) {
	res := run(t, "./testdata/patches")
	f := flowNamed(t, res, "patches.quote")
	if !reflect.DeepEqual(f.Effects, []string{"write", "send"}) {
		t.Errorf("effects %q, want [write send]", f.Effects)
	}
	if !reflect.DeepEqual(f.Steps, []string{"rate", "fastest"}) {
		t.Errorf("steps %q, want [rate fastest]", f.Steps)
	}
}
