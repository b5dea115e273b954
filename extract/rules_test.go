package extract_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/okengine/oke/extract"
)

// Each rule of DESIGN.md section 8 has a fixture that breaks it; extract
// reports each break as FILE:LINE:COL: flow "NAME": WHAT; FIX.
func TestRules(t *testing.T) {
	const drop = "drop Required (use oke.Auto, or leave Idempotency out)"
	cases := []struct {
		rule    string
		fixture string
		want    []string // Diagnostic.String(), sorted by position
	}{
		{"an unparseable TTL fails extract", "./testdata/rules/ttl", []string{
			`extract/testdata/rules/ttl/ttl.go:15:12: flow "ttl.note": Idempotency.TTL "2 s" is not a TTL: want a positive integer followed by ms, s, m, h or d; write it like "24h", "15m" or "7d", or leave TTL out for 24h`,
			`extract/testdata/rules/ttl/ttl.go:27:2: flow "ttl.hook": the webhook binding's DedupeTTL "soon" is not a TTL (a positive integer followed by ms, s, m, h or d); write e.g. .DedupeTTL("30d")`,
		}},
		{"required on a GET, a stream, a live feed or a flow with no qualifying effect fails extract", "./testdata/rules/required", []string{
			`extract/testdata/rules/required/required.go:25:14: flow "required.stream": Idempotency is required, but the flow is a stream, which never stores its response and ignores the header; ` + drop,
			`extract/testdata/rules/required/required.go:31:12: flow "required.live": Idempotency is required, but the flow is a live feed, which ignores the header; ` + drop,
			`extract/testdata/rules/required/required.go:36:16: flow "required.readOnly": Idempotency is required, but the flow has no effect that qualifies for it (inferred effects: read, secrets; only a write, emit, send, call, fetch, ask, embed or raw qualifies); ` + drop + `, or give the flow the effect it is missing`,
			`extract/testdata/rules/required/required.go:46:2: flow "required.get": Idempotency is required, but the flow is bound to GET /items/{id}, which never honors the header; ` + drop + `, or bind the flow with POST (or another method than GET)`,
		}},
		{"declared effects that leave out an inferred non-read effect fail extract", "./testdata/rules/effects", []string{
			`extract/testdata/rules/effects/effects.go:19:15: flow "effects.publish": Options.Effects declares [read] but the flow also has raw (extract/testdata/rules/effects/effects.go:21 publish → extract/testdata/rules/effects/effects.go:16 fx.Raw); add oke.EffectRaw to Effects, or drop Effects and let oke extract infer them`,
		}},
		{"a durable flow that uses one constant step name twice fails extract", "./testdata/rules/steps", []string{
			`extract/testdata/rules/steps/steps.go:26:16: flow "steps.twice": step name "charge" is used twice in one run (extract/testdata/rules/steps/steps.go:23 and extract/testdata/rules/steps/steps.go:26); step names must be unique in a durable run: rename one`,
			`extract/testdata/rules/steps/steps.go:35:17: flow "steps.loop": step name "charge" is used in a loop (extract/testdata/rules/steps/steps.go:35), so every iteration saves a step of the same name and the run fails when it picks up; make the name unique per iteration, e.g. fmt.Sprintf("charge %d", i)`,
		}},
		{"two flows with one name fail extract", "./testdata/rules/name", []string{
			`extract/testdata/rules/name/name.go:20:19: flow "name.charge": another flow has this name (extract/testdata/rules/name/name.go:15); an app refuses two flows with one name: rename one`,
		}},
		{"an input field's validation tag that does not parse fails extract", "./testdata/rules/tag", []string{
			`extract/testdata/rules/tag/tag.go:13:2: flow "tag.pay": input tag.In: field Amount (amount): tag minimum:"one": "one" is not a number; fix the tag (the decoder would refuse to start: see oke.NewFlow)`,
			`extract/testdata/rules/tag/tag.go:14:2: flow "tag.pay": input tag.In: field Code (code): tag pattern:"([": not a regular expression: error parsing regexp: missing closing ]: ` + "`[`" + `; fix the tag (the decoder would refuse to start: see oke.NewFlow)`,
			`extract/testdata/rules/tag/tag.go:19:2: flow "tag.pay": input tag.Item: field N (n): tag minLength:"1": applies to a string, not to an integer; fix the tag (the decoder would refuse to start: see oke.NewFlow)`,
			`extract/testdata/rules/tag/tag.go:33:1: //oke:header X-Foo: tag pattern:"(": not a regular expression: error parsing regexp: missing closing ): ` + "`(`" + `; write it as //oke:header NAME pattern:"…" maxLength:"…" (validation tags)`,
		}},
		{"options computed at run time are a warning, not a broken rule", "./testdata/rules/runtime", nil},
		{"the flows fixture breaks no rule", "./testdata/flows", nil},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			res := run(t, tc.fixture)
			var got []string
			for _, d := range res.Diagnostics {
				got = append(got, d.String())
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("diagnostics:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			// Nothing is written when a rule is broken.
			if len(tc.want) > 0 {
				dir := t.TempDir()
				if _, err := res.Write(dir); !errors.Is(err, extract.ErrRulesBroken) {
					t.Fatalf("Write: %v, want ErrRulesBroken", err)
				}
				if ents, _ := os.ReadDir(dir); len(ents) > 0 {
					t.Errorf("Write wrote %d files", len(ents))
				}
				gen := filepath.Join(strings.TrimPrefix(tc.fixture, "./"), extract.GoFile)
				if _, err := os.Stat(gen); !os.IsNotExist(err) {
					t.Errorf("%s exists (%v)", gen, err)
				}
			}
		})
	}
}

// The rule of each diagnostic, as -json reports it.
func TestRuleNames(t *testing.T) {
	cases := map[string][]string{
		"./testdata/rules/ttl":      {extract.RuleTTL, extract.RuleTTL},
		"./testdata/rules/required": {extract.RuleRequired, extract.RuleRequired, extract.RuleRequired, extract.RuleRequired},
		"./testdata/rules/effects":  {extract.RuleEffects},
		"./testdata/rules/steps":    {extract.RuleStepName, extract.RuleStepName},
		"./testdata/rules/name":     {extract.RuleName},
	}
	for fixture, want := range cases {
		var got []string
		for _, d := range run(t, fixture).Diagnostics {
			got = append(got, d.Rule)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: rules %q, want %q", fixture, got, want)
		}
	}
}

// Options chosen at run time: a warning naming the flow and the fix, mode
// "unknown" in the contract, and an empty mode in the Go file (so App.Start
// falls back to the run-time rule).
func TestOptionsComputedAtRunTime(t *testing.T) {
	res := runIn(t, "", "./testdata/rules/runtime")
	want := `extract/testdata/rules/runtime/runtime.go:21:9: flow "runtime.charge": options computed at run time (Idempotency: chosen at run time at extract/testdata/rules/runtime/runtime.go:17); extract checks no rule on them, assumes the header is honored where a flow with these effects could honor it, and App.Start uses the run-time rule for this flow; make the options constant (oke.Options{…} with constant fields)`
	if len(res.Warnings) != 1 || res.Warnings[0].String() != want {
		t.Fatalf("warnings %v, want [%s]", res.Warnings, want)
	}
	f := flowNamed(t, res, "runtime.charge")
	if f.Idempotency.Mode != "unknown" || !f.Bindings[0].Honored || !reflect.DeepEqual(f.Effects, []string{"emit"}) {
		t.Errorf("flow %s", jsonString(f))
	}
	files, err := res.Files(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for name, src := range files {
		if strings.HasSuffix(name, extract.GoFile) && !strings.Contains(string(src), `Idempotency: oke.ContractIdempotency{Mode: "", TTL: "", Claim: ""},`) {
			t.Errorf("%s:\n%s", name, src)
		}
	}
}
