// Package constraint reads the validation tags of flow input fields — the
// convention of huma (github.com/danielgtaylor/huma): minimum, maximum,
// exclusiveMinimum, exclusiveMaximum, minLength, maxLength, pattern, enum,
// format, minItems, maxItems — and checks JSON values against them. oke's
// decoder enforces them (package oke, strictjson.go) and oke extract writes
// them into the JSON Schema (package extract): one parser, so the two never
// disagree.
//
// The rules are JSON Schema's (2020-12), applied to the JSON as it was sent:
// a rule holds only for a field that is present and not null; minLength and
// maxLength count Unicode code points; pattern is a regular expression
// searched anywhere in the string (anchor it with ^…$), written in the
// syntax RE2 and ECMA-262 share; on an array field minItems and maxItems
// bound its length while the other rules apply to each item.
package constraint

import (
	"fmt"
	"math/big"
	"net/mail"
	"net/netip"
	"net/url"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Kind is the JSON kind of a field's value (through pointers).
type Kind uint8

// The kinds rules apply to; Other takes none.
const (
	Other Kind = iota
	String
	Integer
	Number
	Bool
	Array
)

func (k Kind) String() string {
	return [...]string{"a value of this type", "a string", "an integer", "a number", "a boolean", "an array"}[k]
}

// Tags are the struct tags this package reads, in the order messages list
// them.
var Tags = []string{"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum",
	"minLength", "maxLength", "pattern", "format", "enum", "minItems", "maxItems"}

// Formats are the values of the format tag the decoder checks.
var Formats = []string{"date", "date-time", "email", "hostname", "ipv4", "ipv6", "uri", "uuid"}

// Rules are a field's parsed tags. The zero value allows everything.
type Rules struct {
	Minimum, ExclusiveMinimum, Maximum, ExclusiveMaximum *Num
	MinLength, MaxLength                                 *int
	Pattern                                              *regexp.Regexp
	Format                                               string
	Enum                                                 []Value
	MinItems, MaxItems                                   *int
	// Items are the rules of each item, on an array field.
	Items *Rules
}

// Num is a number as written in a tag: its exact value and its text.
type Num struct {
	Rat  *big.Rat
	Text string
	// i is Rat's value when it is an integer that fits in an int64
	// (isInt): CheckNumber then compares integer literals without big.Rat.
	i     int64
	isInt bool
}

// Value is one enum value: a string, or a number's exact value.
type Value struct {
	Str string
	Num *big.Rat // nil for a string
	B   *bool
}

// Parse reads the tags of a field whose value is of kind k (and, for an
// array, whose items are of kind item). It returns nil when the field has
// none of the tags, and an error naming the tag and what is wrong with it.
func Parse(tag reflect.StructTag, k, item Kind) (*Rules, error) {
	var r, items Rules
	found := false
	for _, name := range Tags {
		v, ok := tag.Lookup(name)
		if !ok {
			continue
		}
		found = true
		target, kind := &r, k
		switch name {
		case "minItems", "maxItems":
			if k != Array {
				return nil, fmt.Errorf("tag %s:%q: applies to an array, not to %s", name, v, k)
			}
		default:
			if k == Array {
				target, kind = &items, item
			}
		}
		if err := target.set(name, v, kind); err != nil {
			return nil, fmt.Errorf("tag %s:%q: %v", name, v, err)
		}
	}
	if !found {
		return nil, nil
	}
	if k == Array && !items.empty() {
		r.Items = &items
	}
	if err := r.consistent(); err != nil {
		return nil, err
	}
	if r.Items != nil {
		if err := r.Items.consistent(); err != nil {
			return nil, err
		}
	}
	return &r, nil
}

func (r *Rules) empty() bool {
	return r.Minimum == nil && r.ExclusiveMinimum == nil && r.Maximum == nil && r.ExclusiveMaximum == nil &&
		r.MinLength == nil && r.MaxLength == nil && r.Pattern == nil && r.Format == "" && r.Enum == nil &&
		r.MinItems == nil && r.MaxItems == nil && r.Items == nil
}

func (r *Rules) consistent() error {
	lo, hi := r.Minimum, r.Maximum
	if lo != nil && hi != nil && lo.Rat.Cmp(hi.Rat) > 0 {
		return fmt.Errorf("tags minimum:%q and maximum:%q: no value is allowed", lo.Text, hi.Text)
	}
	if r.MinLength != nil && r.MaxLength != nil && *r.MinLength > *r.MaxLength {
		return fmt.Errorf("tags minLength:\"%d\" and maxLength:\"%d\": no value is allowed", *r.MinLength, *r.MaxLength)
	}
	if r.MinItems != nil && r.MaxItems != nil && *r.MinItems > *r.MaxItems {
		return fmt.Errorf("tags minItems:\"%d\" and maxItems:\"%d\": no value is allowed", *r.MinItems, *r.MaxItems)
	}
	return nil
}

func (r *Rules) set(name, v string, k Kind) error {
	numeric := k == Integer || k == Number
	switch name {
	case "minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum":
		if !numeric {
			return fmt.Errorf("applies to a number, not to %s", k)
		}
		n, err := parseNum(v)
		if err != nil {
			return err
		}
		switch name {
		case "minimum":
			r.Minimum = n
		case "exclusiveMinimum":
			r.ExclusiveMinimum = n
		case "maximum":
			r.Maximum = n
		default:
			r.ExclusiveMaximum = n
		}
	case "minLength", "maxLength", "minItems", "maxItems":
		if k != String && (name == "minLength" || name == "maxLength") {
			return fmt.Errorf("applies to a string, not to %s", k)
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return fmt.Errorf("want a non-negative integer")
		}
		switch name {
		case "minLength":
			r.MinLength = &n
		case "maxLength":
			r.MaxLength = &n
		case "minItems":
			r.MinItems = &n
		default:
			r.MaxItems = &n
		}
	case "pattern":
		if k != String {
			return fmt.Errorf("applies to a string, not to %s", k)
		}
		re, err := regexp.Compile(v)
		if err != nil {
			return fmt.Errorf("not a regular expression: %v", err)
		}
		r.Pattern = re
	case "format":
		if k != String {
			return fmt.Errorf("applies to a string, not to %s", k)
		}
		if formatCheck(v) == nil {
			return fmt.Errorf("unknown format; the decoder checks %s", strings.Join(Formats, ", "))
		}
		r.Format = v
	case "enum":
		if k != String && !numeric && k != Bool {
			return fmt.Errorf("applies to a string, a number or a boolean, not to %s", k)
		}
		for _, s := range strings.Split(v, ",") {
			switch {
			case numeric:
				n, err := parseNum(s)
				if err != nil {
					return err
				}
				if k == Integer && !n.Rat.IsInt() {
					return fmt.Errorf("%q is not an integer", s)
				}
				r.Enum = append(r.Enum, Value{Num: n.Rat, Str: n.Text})
			case k == Bool:
				b, err := strconv.ParseBool(s)
				if err != nil || (s != "true" && s != "false") {
					return fmt.Errorf("%q is not true or false", s)
				}
				r.Enum = append(r.Enum, Value{B: &b, Str: s})
			default:
				r.Enum = append(r.Enum, Value{Str: s})
			}
		}
	}
	return nil
}

func parseNum(s string) (*Num, error) {
	s = strings.TrimSpace(s)
	if _, err := strconv.ParseFloat(s, 64); err != nil {
		return nil, fmt.Errorf("%q is not a number", s)
	}
	q, ok := new(big.Rat).SetString(s)
	if !ok {
		return nil, fmt.Errorf("%q is not a number", s)
	}
	n := &Num{Rat: q, Text: s}
	if q.IsInt() && q.Num().IsInt64() {
		n.i, n.isInt = q.Num().Int64(), true
	}
	return n, nil
}

// CheckNumber checks a JSON number literal; it returns what is wrong, or "".
func (r *Rules) CheckNumber(lit string) string {
	if msg, ok := r.checkInt(lit); ok {
		return msg
	}
	return r.checkRat(lit)
}

// checkInt is CheckNumber for the common case, without big.Rat: lit an
// integer that fits in an int64, every bound set an integer too, no enum.
// ok is false when the case is not that one.
func (r *Rules) checkInt(lit string) (msg string, ok bool) {
	if r.Enum != nil {
		return "", false
	}
	for _, b := range [...]*Num{r.Minimum, r.ExclusiveMinimum, r.Maximum, r.ExclusiveMaximum} {
		if b != nil && !b.isInt {
			return "", false
		}
	}
	// A JSON number literal has no '+'; ParseInt rejects a fraction or an
	// exponent, and a value out of int64's range.
	v, err := strconv.ParseInt(lit, 10, 64)
	if err != nil {
		return "", false
	}
	switch {
	case r.Minimum != nil && v < r.Minimum.i:
		return "must be at least " + r.Minimum.Text, true
	case r.ExclusiveMinimum != nil && v <= r.ExclusiveMinimum.i:
		return "must be greater than " + r.ExclusiveMinimum.Text, true
	case r.Maximum != nil && v > r.Maximum.i:
		return "must be at most " + r.Maximum.Text, true
	case r.ExclusiveMaximum != nil && v >= r.ExclusiveMaximum.i:
		return "must be less than " + r.ExclusiveMaximum.Text, true
	}
	return "", true
}

// checkRat is CheckNumber by exact rational arithmetic: any literal, any
// bound.
func (r *Rules) checkRat(lit string) string {
	q, ok := new(big.Rat).SetString(lit)
	if !ok {
		return ""
	}
	switch {
	case r.Minimum != nil && q.Cmp(r.Minimum.Rat) < 0:
		return "must be at least " + r.Minimum.Text
	case r.ExclusiveMinimum != nil && q.Cmp(r.ExclusiveMinimum.Rat) <= 0:
		return "must be greater than " + r.ExclusiveMinimum.Text
	case r.Maximum != nil && q.Cmp(r.Maximum.Rat) > 0:
		return "must be at most " + r.Maximum.Text
	case r.ExclusiveMaximum != nil && q.Cmp(r.ExclusiveMaximum.Rat) >= 0:
		return "must be less than " + r.ExclusiveMaximum.Text
	}
	if r.Enum != nil {
		for _, e := range r.Enum {
			if e.Num != nil && e.Num.Cmp(q) == 0 {
				return ""
			}
		}
		return "must be one of " + r.enumText()
	}
	return ""
}

// CheckString checks a JSON string's value.
func (r *Rules) CheckString(s string) string {
	n := utf8.RuneCountInString(s)
	switch {
	case r.MinLength != nil && n < *r.MinLength:
		return fmt.Sprintf("must be at least %d characters long (minLength), got %d", *r.MinLength, n)
	case r.MaxLength != nil && n > *r.MaxLength:
		return fmt.Sprintf("must be at most %d characters long (maxLength), got %d", *r.MaxLength, n)
	case r.Pattern != nil && !r.Pattern.MatchString(s):
		return fmt.Sprintf("must match the pattern %s", r.Pattern)
	case r.Format != "" && !formatCheck(r.Format)(s):
		return "must be in the format " + r.Format
	}
	if r.Enum != nil {
		for _, e := range r.Enum {
			if e.Num == nil && e.B == nil && e.Str == s {
				return ""
			}
		}
		return "must be one of " + r.enumText()
	}
	return ""
}

// CheckBool checks a JSON boolean.
func (r *Rules) CheckBool(b bool) string {
	if r.Enum == nil {
		return ""
	}
	for _, e := range r.Enum {
		if e.B != nil && *e.B == b {
			return ""
		}
	}
	return "must be one of " + r.enumText()
}

// CheckItems checks an array's length.
func (r *Rules) CheckItems(n int) string {
	switch {
	case r.MinItems != nil && n < *r.MinItems:
		return fmt.Sprintf("must have at least %d items (minItems), got %d", *r.MinItems, n)
	case r.MaxItems != nil && n > *r.MaxItems:
		return fmt.Sprintf("must have at most %d items (maxItems), got %d", *r.MaxItems, n)
	}
	return ""
}

func (r *Rules) enumText() string {
	var parts []string
	for _, e := range r.Enum {
		if e.Num == nil && e.B == nil {
			parts = append(parts, strconv.Quote(e.Str))
		} else {
			parts = append(parts, e.Str)
		}
	}
	return strings.Join(parts, ", ")
}

// Schema returns the rules as JSON Schema keywords (for an array field, the
// item rules under "items" are the caller's to merge: see ItemSchema).
func (r *Rules) Schema() map[string]any {
	out := map[string]any{}
	num := func(n *Num) any {
		if n.Rat.IsInt() {
			if i, err := strconv.ParseInt(n.Rat.Num().String(), 10, 64); err == nil {
				return i
			}
		}
		f, _ := n.Rat.Float64()
		return f
	}
	if r.Minimum != nil {
		out["minimum"] = num(r.Minimum)
	}
	if r.ExclusiveMinimum != nil {
		out["exclusiveMinimum"] = num(r.ExclusiveMinimum)
	}
	if r.Maximum != nil {
		out["maximum"] = num(r.Maximum)
	}
	if r.ExclusiveMaximum != nil {
		out["exclusiveMaximum"] = num(r.ExclusiveMaximum)
	}
	if r.MinLength != nil {
		out["minLength"] = *r.MinLength
	}
	if r.MaxLength != nil {
		out["maxLength"] = *r.MaxLength
	}
	if r.Pattern != nil {
		out["pattern"] = r.Pattern.String()
	}
	if r.Format != "" {
		out["format"] = r.Format
	}
	if r.Enum != nil {
		var vs []any
		for _, e := range r.Enum {
			switch {
			case e.B != nil:
				vs = append(vs, *e.B)
			case e.Num != nil:
				vs = append(vs, num(&Num{Rat: e.Num, Text: e.Str}))
			default:
				vs = append(vs, e.Str)
			}
		}
		out["enum"] = vs
	}
	if r.MinItems != nil {
		out["minItems"] = *r.MinItems
	}
	if r.MaxItems != nil {
		out["maxItems"] = *r.MaxItems
	}
	return out
}

var (
	uuidRE     = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	hostnameRE = regexp.MustCompile(`^(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$`)
	dateTimeRE = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[Zz]|[+-]\d{2}:\d{2})$`)
)

func formatCheck(f string) func(string) bool {
	switch f {
	case "date":
		return func(s string) bool { _, err := time.Parse(time.DateOnly, s); return err == nil }
	case "date-time":
		return func(s string) bool {
			if !dateTimeRE.MatchString(s) {
				return false
			}
			_, err := time.Parse(time.RFC3339Nano, strings.ToUpper(s))
			return err == nil
		}
	case "email":
		return func(s string) bool {
			a, err := mail.ParseAddress(s)
			return err == nil && a.Address == s && a.Name == ""
		}
	case "hostname":
		return func(s string) bool { return len(s) <= 253 && hostnameRE.MatchString(s) }
	case "ipv4":
		return func(s string) bool { a, err := netip.ParseAddr(s); return err == nil && a.Is4() }
	case "ipv6":
		return func(s string) bool {
			a, err := netip.ParseAddr(s)
			return err == nil && a.Is6() && a.Zone() == ""
		}
	case "uri":
		return func(s string) bool {
			u, err := url.Parse(s)
			return err == nil && u.Scheme != "" && utf8.ValidString(s) && !strings.ContainsAny(s, " \t\n\\<>\"{}|^`")
		}
	case "uuid":
		return uuidRE.MatchString
	}
	return nil
}

var (
	jsonUnmarshaler = reflect.TypeFor[interface{ UnmarshalJSON([]byte) error }]()
	textUnmarshaler = reflect.TypeFor[interface{ UnmarshalText([]byte) error }]()
)

// KindOf is the kind of a Go type's JSON value as encoding/json decodes it
// (through pointers), and for a slice or array its items' kind. A type that
// decodes itself is Other, except json.Number, a Number.
func KindOf(t reflect.Type) (k, item Kind) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.PkgPath() == "encoding/json" && t.Name() == "Number" {
		return Number, Other
	}
	if t.Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(jsonUnmarshaler) ||
		t.Implements(textUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler) {
		return Other, Other
	}
	switch t.Kind() {
	case reflect.String:
		return String, Other
	case reflect.Bool:
		return Bool, Other
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return Integer, Other
	case reflect.Float32, reflect.Float64:
		return Number, Other
	case reflect.Slice, reflect.Array:
		if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 {
			e := t.Elem()
			if !e.Implements(jsonUnmarshaler) && !reflect.PointerTo(e).Implements(jsonUnmarshaler) &&
				!e.Implements(textUnmarshaler) && !reflect.PointerTo(e).Implements(textUnmarshaler) {
				return Other, Other // []byte: a base64 string
			}
		}
		item, _ := KindOf(t.Elem())
		return Array, item
	}
	return Other, Other
}
