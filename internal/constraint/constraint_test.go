package constraint

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestSchema: each tag becomes its JSON Schema keyword, numbers as JSON
// numbers; an array's other tags go to its items.
func TestSchema(t *testing.T) {
	for _, tc := range []struct {
		tag      reflect.StructTag
		k, item  Kind
		want     string
		wantItem string
	}{
		{`minimum:"1" maximum:"10.5"`, Number, Other, `{"maximum":10.5,"minimum":1}`, ""},
		{`exclusiveMinimum:"0" exclusiveMaximum:"1e3"`, Integer, Other, `{"exclusiveMaximum":1000,"exclusiveMinimum":0}`, ""},
		{`minLength:"1" maxLength:"3" pattern:"^a" format:"uuid"`, String, Other, `{"format":"uuid","maxLength":3,"minLength":1,"pattern":"^a"}`, ""},
		{`enum:"usd,eur"`, String, Other, `{"enum":["usd","eur"]}`, ""},
		{`enum:"1,2"`, Integer, Other, `{"enum":[1,2]}`, ""},
		{`enum:"true"`, Bool, Other, `{"enum":[true]}`, ""},
		{`minItems:"1" maxItems:"2" enum:"a,b"`, Array, String, `{"maxItems":2,"minItems":1}`, `{"enum":["a","b"]}`},
	} {
		r, err := Parse(tc.tag, tc.k, tc.item)
		if err != nil {
			t.Fatalf("%s: %v", tc.tag, err)
		}
		if b, _ := json.Marshal(r.Schema()); string(b) != tc.want {
			t.Errorf("%s: %s, want %s", tc.tag, b, tc.want)
		}
		if tc.wantItem != "" {
			if b, _ := json.Marshal(r.Items.Schema()); r.Items == nil || string(b) != tc.wantItem {
				t.Errorf("%s items: %s, want %s", tc.tag, b, tc.wantItem)
			}
		}
	}
	if r, err := Parse(`json:"x"`, String, Other); r != nil || err != nil {
		t.Errorf("no tags: %v %v", r, err)
	}
}

// TestBadTags: a tag that does not parse, or does not apply to the field's
// kind, or allows nothing, is an error naming the tag.
func TestBadTags(t *testing.T) {
	for _, tc := range []struct {
		tag  reflect.StructTag
		k    Kind
		want string
	}{
		{`minimum:"x"`, Integer, `minimum:"x": "x" is not a number`},
		{`maximum:"1"`, String, "applies to a number, not to a string"},
		{`minLength:"-1"`, String, "want a non-negative integer"},
		{`maxLength:"1"`, Integer, "applies to a string, not to an integer"},
		{`pattern:"("`, String, "not a regular expression"},
		{`format:"color"`, String, "unknown format"},
		{`enum:"1.5"`, Integer, `"1.5" is not an integer`},
		{`enum:"yes"`, Bool, "not true or false"},
		{`minItems:"1"`, String, "applies to an array"},
		{`minimum:"2" maximum:"1"`, Integer, "no value is allowed"},
		{`minLength:"1"`, Other, "not to a value of this type"},
	} {
		if _, err := Parse(tc.tag, tc.k, Other); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.tag, err, tc.want)
		}
	}
}

// TestChecks: the checks follow JSON Schema: exact numbers, characters
// not bytes, a searched pattern, formats.
func TestChecks(t *testing.T) {
	r, _ := Parse(`minimum:"1" exclusiveMaximum:"9007199254740993"`, Integer, Other)
	for lit, ok := range map[string]bool{"1": true, "0": false, "0.999": false, "1e0": true, "9007199254740992": true, "9007199254740993": false} {
		if got := r.CheckNumber(lit) == ""; got != ok {
			t.Errorf("number %s: ok=%v, want %v", lit, got, ok)
		}
	}
	s, _ := Parse(`minLength:"2" maxLength:"2" pattern:"b"`, String, Other)
	for v, ok := range map[string]bool{"ab": true, "éb": true, "b": false, "abc": false, "aa": false} {
		if got := s.CheckString(v) == ""; got != ok {
			t.Errorf("string %q: ok=%v, want %v", v, got, ok)
		}
	}
	for f, vs := range map[string]map[string]bool{
		"date-time": {"2026-01-02T03:04:05Z": true, "2026-01-02T03:04:05.5+01:00": true, "2026-01-02": false, "2026-13-02T03:04:05Z": false},
		"date":      {"2026-01-02": true, "2026-1-2": false},
		"email":     {"a@b.example": true, "A <a@b.example>": false, "nope": false},
		"uuid":      {"123e4567-e89b-12d3-a456-426614174000": true, "123e4567": false},
		"ipv4":      {"10.0.0.1": true, "::1": false},
		"ipv6":      {"::1": true, "fe80::1%eth0": false, "10.0.0.1": false},
		"uri":       {"https://x.example/a?b": true, "/relative": false, "http://a b": false},
		"hostname":  {"a.example": true, "-a.example": false},
	} {
		r, err := Parse(reflect.StructTag(`format:"`+f+`"`), String, Other)
		if err != nil {
			t.Fatal(err)
		}
		for v, ok := range vs {
			if got := r.CheckString(v) == ""; got != ok {
				t.Errorf("format %s %q: ok=%v, want %v", f, v, got, ok)
			}
		}
	}
}

// TestCheckNumberFastPathAgrees: integer literals checked against integer
// bounds without big.Rat (checkInt) answer what exact rational arithmetic
// (checkRat) answers, for every bound kind, at int64's edges and past
// them, and for literals the fast path must leave to checkRat.
func TestCheckNumberFastPathAgrees(t *testing.T) {
	bounds := []string{"0", "1", "-1", "7", "9223372036854775807", "-9223372036854775808", "9223372036854775808", "0.5", "1e3"}
	lits := []string{"0", "-0", "1", "-1", "6", "7", "8", "1000", "9223372036854775806", "9223372036854775807",
		"9223372036854775808", "-9223372036854775808", "-9223372036854775809", "1.0", "7.5", "1e3", "1E3", "-1e-3", "0.4999"}
	fast := 0
	for _, kw := range []string{"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"} {
		for _, b := range bounds {
			r, err := Parse(reflect.StructTag(kw+`:"`+b+`"`), Number, Other)
			if err != nil {
				t.Fatalf("%s:%q: %v", kw, b, err)
			}
			for _, lit := range lits {
				want := r.checkRat(lit)
				if msg, ok := r.checkInt(lit); ok {
					fast++
					if msg != want {
						t.Errorf("%s %s, literal %s: fast path says %q, exact arithmetic %q", kw, b, lit, msg, want)
					}
				}
				if got := r.CheckNumber(lit); got != want {
					t.Errorf("%s %s, literal %s: CheckNumber says %q, want %q", kw, b, lit, got, want)
				}
			}
		}
	}
	if fast == 0 {
		t.Fatal("the fast path never applied")
	}
	r, _ := Parse(`minimum:"1" enum:"1,2"`, Integer, Other)
	if _, ok := r.checkInt("2"); ok {
		t.Error("the fast path applied to a field with an enum")
	}
}

func BenchmarkCheckNumber(b *testing.B) {
	r, _ := Parse(`minimum:"1"`, Integer, Other)
	b.ReportAllocs()
	for b.Loop() {
		if r.CheckNumber("1000") != "" {
			b.Fatal("1000 is at least 1")
		}
	}
}
