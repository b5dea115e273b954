package spectest

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/getkin/kin-openapi/openapi3"
	"pgregory.net/rapid"
)

// This file draws JSON values from the JSON Schemas of the spec: valid ones
// (every keyword the demo's spec uses: type, enum, const, required,
// properties, additionalProperties, minimum/maximum and their exclusive
// forms, multipleOf, minLength/maxLength in characters, pattern, format,
// items, minItems/maxItems, oneOf/anyOf/allOf of objects), and, for one
// keyword at a time, values that break it.

// cap narrows the range a valid integer is drawn from, for a field whose
// value costs time (a wait in milliseconds, a number of steps): the value
// still satisfies the schema, which is all the spec promises; the bounds
// themselves are still broken by the invalid requests. A cap never widens.
type caps map[string]int64 // JSON pointer of the property ("/ms") → largest value drawn

// gen draws a valid value of s. at is the JSON pointer of the value (for
// caps and for naming draws).
func gen(t *rapid.T, s *openapi3.Schema, at string, c caps) any {
	if s == nil {
		return rapid.SampledFrom([]any{"x", 1.0, true, nil}).Draw(t, at)
	}
	if s.Const != nil {
		return s.Const
	}
	if len(s.Enum) > 0 {
		return rapid.SampledFrom(s.Enum).Draw(t, at)
	}
	if len(s.AllOf) > 0 {
		return genAllOf(t, s, at, c)
	}
	if len(s.OneOf) > 0 || len(s.AnyOf) > 0 {
		alts := s.OneOf
		if len(alts) == 0 {
			alts = s.AnyOf
		}
		i := rapid.IntRange(0, len(alts)-1).Draw(t, at+"#alt")
		return gen(t, alts[i].Value, at, c)
	}
	types := s.Type.Slice()
	if len(types) == 0 {
		switch {
		case len(s.Properties) > 0:
			types = []string{"object"}
		case s.Items != nil:
			types = []string{"array"}
		default:
			types = []string{"string", "integer", "boolean", "object"}
		}
	}
	switch typ := rapid.SampledFrom(types).Draw(t, at+"#type"); typ {
	case "null":
		return nil
	case "boolean":
		return rapid.Bool().Draw(t, at)
	case "integer":
		return float64(genInteger(t, s, at, c))
	case "number":
		return genNumber(t, s, at)
	case "string":
		return genString(t, s, at)
	case "array":
		return genArray(t, s, at, c)
	case "object":
		return genObject(t, s, at, c)
	default:
		panic(fmt.Sprintf("%s: type %q", at, typ))
	}
}

func genAllOf(t *rapid.T, s *openapi3.Schema, at string, c caps) any {
	out := map[string]any{}
	for _, part := range s.AllOf {
		v, ok := gen(t, part.Value, at, c).(map[string]any)
		if !ok {
			panic(at + ": allOf of something other than objects")
		}
		for k, x := range v {
			out[k] = x
		}
	}
	return out
}

// intBounds are the inclusive bounds of an integer schema: its minimum and
// maximum (exclusive ones moved in by one), else those of its format,
// else I-JSON's (RFC 7493): ±(2⁵³−1), the integers every JSON reader
// (kin-openapi's float64 among them) holds exactly.
func intBounds(s *openapi3.Schema) (lo, hi int64) {
	lo, hi = -(1<<53 - 1), 1<<53-1
	if s.Format == "int32" {
		lo, hi = math.MinInt32, math.MaxInt32
	}
	if s.Min != nil {
		lo = max(lo, int64(math.Ceil(*s.Min)))
	}
	if s.Max != nil {
		hi = min(hi, int64(math.Floor(*s.Max)))
	}
	if v := s.ExclusiveMin.Value; v != nil {
		lo = max(lo, int64(math.Floor(*v))+1)
	} else if s.ExclusiveMin.IsTrue() && s.Min != nil && float64(lo) == *s.Min {
		lo++
	}
	if v := s.ExclusiveMax.Value; v != nil {
		hi = min(hi, int64(math.Ceil(*v))-1)
	} else if s.ExclusiveMax.IsTrue() && s.Max != nil && float64(hi) == *s.Max {
		hi--
	}
	return lo, hi
}

func genInteger(t *rapid.T, s *openapi3.Schema, at string, c caps) int64 {
	lo, hi := intBounds(s)
	if lim, ok := c[at]; ok && lim >= lo && lim < hi {
		hi = lim
	}
	if lo > hi {
		panic(fmt.Sprintf("%s: no integer in [%d, %d]", at, lo, hi))
	}
	// The bounds themselves often, then anything in between.
	v := rapid.OneOf(rapid.Just(lo), rapid.Just(hi), rapid.Int64Range(lo, hi)).Draw(t, at)
	if m := s.MultipleOf; m != nil && *m >= 1 {
		step := int64(*m)
		v -= v % step
		if v < lo {
			v += step
		}
		if v > hi {
			panic(fmt.Sprintf("%s: no multiple of %d in [%d, %d]", at, step, lo, hi))
		}
	}
	return v
}

func genNumber(t *rapid.T, s *openapi3.Schema, at string) float64 {
	lo, hi := -1e9, 1e9
	if s.Min != nil {
		lo = *s.Min
	}
	if s.Max != nil {
		hi = *s.Max
	}
	return rapid.Float64Range(lo, hi).Draw(t, at)
}

// lenBounds are a string schema's bounds in characters (code points, as
// JSON Schema counts them).
func lenBounds(s *openapi3.Schema) (lo, hi int) {
	lo, hi = int(s.MinLength), 40
	if s.MaxLength != nil {
		hi = int(*s.MaxLength)
	} else if hi < lo {
		hi = lo + 40
	}
	return lo, hi
}

func genString(t *rapid.T, s *openapi3.Schema, at string) string {
	lo, hi := lenBounds(s)
	if f := formatGen(s.Format); f != nil && s.Pattern == "" {
		return rapid.Custom(func(t *rapid.T) string {
			v := f.Draw(t, at)
			if n := utf8.RuneCountInString(v); n < lo || n > hi {
				t.Skipf("%s: format %s drew %q, outside its length bounds", at, s.Format, v)
			}
			return v
		}).Draw(t, at)
	}
	if s.Pattern != "" {
		re := regexp.MustCompile(s.Pattern)
		return rapid.Custom(func(t *rapid.T) string {
			v := rapid.StringMatching(s.Pattern).Draw(t, at)
			if n := utf8.RuneCountInString(v); n < lo || n > hi || !re.MatchString(v) {
				// StringMatching draws a string with a match in it; a
				// length outside the bounds is drawn again.
				t.Skipf("%s: %q is outside the bounds of its pattern", at, v)
			}
			return v
		}).Draw(t, at)
	}
	return rapid.StringN(lo, hi, -1).Draw(t, at)
}

// formatGen draws strings of the formats the generator knows; nil for
// others (they are drawn as plain strings: JSON Schema makes formats
// annotations unless a validator asserts them).
func formatGen(format string) *rapid.Generator[string] {
	switch format {
	case "date-time":
		return rapid.Custom(func(t *rapid.T) string {
			sec := rapid.Int64Range(0, 4102444800).Draw(t, "unix")
			return time.Unix(sec, 0).UTC().Format(time.RFC3339)
		})
	case "date":
		return rapid.Custom(func(t *rapid.T) string {
			return time.Unix(rapid.Int64Range(0, 4102444800).Draw(t, "unix"), 0).UTC().Format(time.DateOnly)
		})
	case "uuid":
		return rapid.StringMatching(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	case "email":
		return rapid.StringMatching(`^[a-z][a-z0-9]{0,10}@[a-z]{1,10}\.(com|org|example)$`)
	case "uri":
		return rapid.StringMatching(`^https://[a-z]{1,10}\.example/[a-z0-9]{0,10}$`)
	}
	return nil
}

func genArray(t *rapid.T, s *openapi3.Schema, at string, c caps) []any {
	lo, hi := int(s.MinItems), int(s.MinItems)+3
	if s.MaxItems != nil {
		hi = int(*s.MaxItems)
	}
	n := rapid.IntRange(lo, hi).Draw(t, at+"#len")
	var items *openapi3.Schema
	if s.Items != nil {
		items = s.Items.Value
	}
	out := make([]any, n)
	for i := range out {
		out[i] = gen(t, items, fmt.Sprintf("%s/%d", at, i), c)
	}
	return out
}

func genObject(t *rapid.T, s *openapi3.Schema, at string, c caps) map[string]any {
	out := map[string]any{}
	for _, name := range sortedKeys(s.Properties) {
		p := s.Properties[name]
		if !slices.Contains(s.Required, name) && !rapid.Bool().Draw(t, at+"/"+name+"#present") {
			continue
		}
		out[name] = gen(t, p.Value, at+"/"+name, c)
	}
	for _, name := range s.Required {
		if _, ok := out[name]; !ok { // required, with no property schema
			out[name] = gen(t, nil, at+"/"+name, c)
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// breaking is one way to break a schema: what it does, and a value of the
// wrong kind for it.
type breaking struct {
	what  string
	value any
}

// breakings lists the ways a value of s can be made invalid by the schema
// itself (for a property: by the keywords of its own schema), each with an
// invalid value. Only keywords the schema states are broken: a schema that
// says nothing about length is not broken by a long string.
func breakings(t *rapid.T, s *openapi3.Schema, at string) []breaking {
	var out []breaking
	types := s.Type.Slice()
	if len(types) > 0 && s.Const == nil && len(s.Enum) == 0 {
		// A value of a type the schema does not allow.
		wrong := []struct {
			typ string
			v   any
		}{{"string", "1"}, {"integer", 7.0}, {"number", 1.5}, {"boolean", true}, {"object", map[string]any{}}, {"array", []any{}}, {"null", nil}}
		for _, w := range wrong {
			ok := slices.Contains(types, w.typ) ||
				(w.typ == "integer" && slices.Contains(types, "number"))
			if !ok {
				b, _ := json.Marshal(w.v)
				out = append(out, breaking{fmt.Sprintf("%s is %s, not of type %v", at, b, types), w.v})
			}
		}
	}
	if len(s.Enum) > 0 {
		out = append(out, breaking{at + " is not one of its enum", "not-in-the-enum-" + rapid.StringMatching(`[a-z]{3}`).Draw(t, at+"#enum")})
	}
	if slices.Contains(types, "integer") {
		lo, hi := intBounds(s)
		if b, ok := beyond(s, -1); ok {
			out = append(out, breaking{fmt.Sprintf("%s below its minimum (%v)", at, b), b})
		}
		if b, ok := beyond(s, +1); ok {
			out = append(out, breaking{fmt.Sprintf("%s above its maximum (%v)", at, b), b})
		}
		if s.MultipleOf != nil && *s.MultipleOf > 1 && lo < hi {
			v := lo + 1 - (lo+1)%int64(*s.MultipleOf) + 1
			out = append(out, breaking{fmt.Sprintf("%s not a multiple of %v", at, *s.MultipleOf), float64(v)})
		}
	}
	if slices.Contains(types, "string") && s.Const == nil && len(s.Enum) == 0 {
		lo, hi := lenBounds(s)
		fill := "a"
		if s.Pattern != "" {
			// Keep the pattern's own alphabet where it has one, so that only
			// the length is wrong.
			if v := genString(t, s, at+"#fill"); v != "" {
				fill = v[:1]
			}
		}
		if lo > 0 {
			out = append(out, breaking{fmt.Sprintf("%s shorter than minLength %d", at, lo), strings.Repeat(fill, lo-1)})
		}
		if s.MaxLength != nil {
			out = append(out, breaking{fmt.Sprintf("%s longer than maxLength %d", at, hi), strings.Repeat(fill, hi+1)})
		}
		if s.Pattern != "" {
			re := regexp.MustCompile(s.Pattern)
			for _, v := range []string{"", " ", "\t", "é", "!", "AAAA", "0", "a b", strings.Repeat("~", max(lo, 1))} {
				if !re.MatchString(v) {
					out = append(out, breaking{fmt.Sprintf("%s %q does not match %s", at, v, s.Pattern), v})
					break
				}
			}
		}
	}
	return out
}

// beyond is an integer just past the schema's lower (dir -1) or upper
// (dir +1) bound, as the schema states it (minimum, exclusiveMinimum, an
// int32 format); false when it states none. A bound too large for a
// float64 to step past by one is stepped past by its own size.
func beyond(s *openapi3.Schema, dir float64) (float64, bool) {
	var b *float64
	excl := false
	if dir < 0 {
		b = s.Min
		if v := s.ExclusiveMin.Value; v != nil {
			b, excl = v, true
		} else if s.ExclusiveMin.IsTrue() {
			excl = true
		}
		if b == nil && s.Format == "int32" {
			v := float64(math.MinInt32)
			b = &v
		}
	} else {
		b = s.Max
		if v := s.ExclusiveMax.Value; v != nil {
			b, excl = v, true
		} else if s.ExclusiveMax.IsTrue() {
			excl = true
		}
		if b == nil && s.Format == "int32" {
			v := float64(math.MaxInt32)
			b = &v
		}
	}
	if b == nil {
		return 0, false
	}
	edge := math.Floor(*b)
	if dir < 0 {
		edge = math.Ceil(*b)
	}
	if excl && edge == *b {
		return edge, true // the bound itself is out
	}
	v := edge + dir
	if v == edge {
		v = edge + dir*math.Abs(edge)
	}
	return v, true
}
