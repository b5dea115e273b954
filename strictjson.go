package oke

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/okengine/oke/internal/constraint"
)

// Strict JSON. encoding/json is lenient in three ways that would let two
// different request bodies run as one request, or one body mean something
// its sender did not write:
//
//   - a duplicated object key: the last value wins ({"amount":1,"amount":2}
//     charges 2);
//   - a key that matches a struct field only when case is ignored
//     ({"AMOUNT":2} fills Amount);
//   - invalid UTF-8 in a string, and lone UTF-16 surrogates in \u escapes:
//     both become U+FFFD, so different bytes share a fingerprint.
//
// strictCheck rejects all three, after encoding/json has accepted the body
// (so it only ever scans well-formed JSON, and syntax errors keep
// encoding/json's messages).

// strictCheck scans body, a well-formed JSON value decoded into a value of
// type t, and returns a 400 *Error for the first duplicated key, case-only
// field match or invalid string it finds.
func strictCheck(body []byte, t reflect.Type, fromURL []string) *Error {
	s := strictScanner{b: body, fromURL: fromURL}
	s.value(strictTarget(t), nullableType(t), nil)
	return s.err
}

type strictScanner struct {
	b   []byte
	i   int
	err *Error
	// path is where the scan is, for messages (built into a string only on
	// error): its first depth steps, the first len(path) of them recorded.
	path  [24]pathSeg
	depth int
	// fromURL are the top-level fields the URL fills (path parameters):
	// they need not be in the body.
	fromURL []string
}

func (s *strictScanner) push(p pathSeg) {
	if s.depth < len(s.path) {
		s.path[s.depth] = p
	}
	s.depth++
}

func (s *strictScanner) pop() { s.depth-- }

// pathSeg is one step of a path: an object member's key, or an array index.
type pathSeg struct {
	key   []byte
	index int // when key is nil
}

// pathString is where the scan is, e.g. items[1].sku; with key appended
// when it is not nil.
func (s *strictScanner) pathString(key []byte) string {
	var b strings.Builder
	for _, p := range s.path[:min(s.depth, len(s.path))] {
		if p.key == nil {
			fmt.Fprintf(&b, "[%d]", p.index)
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.Write(p.key)
	}
	if s.depth > len(s.path) {
		b.WriteString("…")
	}
	if key != nil {
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.Write(key)
	}
	return b.String()
}

func (s *strictScanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// value scans one value that decodes into t, a strictTarget (nil:
// unknown, check only keys and strings). nullable says whether null
// decodes into it as null (a pointer, slice, map or interface) rather than
// being dropped; f, when not nil, is the struct field it fills, whose
// rules it must meet.
func (s *strictScanner) value(t reflect.Type, nullable bool, f *strictField) {
	s.ws()
	if s.err != nil || s.i >= len(s.b) {
		return
	}
	var rules *constraint.Rules
	if f != nil {
		rules = f.rules
	}
	switch c := s.b[s.i]; c {
	case '{':
		s.object(t)
	case '[':
		var (
			elem         reflect.Type
			elemNullable = true
			elemField    *strictField
		)
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = strictTarget(t.Elem())
			elemNullable = nullableType(t.Elem())
			if rules != nil && rules.Items != nil {
				elemField = &strictField{rules: rules.Items}
			}
		}
		s.i++
		n := 0
		for ; ; n++ {
			s.ws()
			if s.i >= len(s.b) || s.b[s.i] == ']' {
				s.i++
				break
			}
			if n > 0 && s.b[s.i] == ',' {
				s.i++
			}
			s.push(pathSeg{index: n})
			s.value(elem, elemNullable, elemField)
			if s.err != nil {
				return
			}
			s.pop()
		}
		if rules != nil {
			s.check(rules.CheckItems(n))
		}
	case '"':
		v, ok := s.str()
		if ok && rules != nil {
			s.check(rules.CheckString(string(v)))
		}
	default: // number, true, false, null
		start := s.i
		for s.i < len(s.b) && !strings.ContainsRune(" \t\n\r,]}", rune(s.b[s.i])) {
			s.i++
		}
		lit := string(s.b[start:s.i])
		switch {
		case c == 'n':
			if !nullable && t != nil {
				s.err = &Error{Status: 400, Code: CodeInvalidInput,
					Message: fmt.Sprintf("%s is null; want %s.", s.where(), jsonKind(t))}
			}
		case rules == nil:
		case c == 't' || c == 'f':
			s.check(rules.CheckBool(c == 't'))
		default:
			s.check(rules.CheckNumber(lit))
		}
	}
}

// check records a rule the value at the scan's path breaks.
func (s *strictScanner) check(violation string) {
	if violation == "" || s.err != nil {
		return
	}
	s.err = &Error{Status: 400, Code: CodeValidationFailed,
		Message: fmt.Sprintf("%s %s.", s.where(), violation)}
}

// where names the value at the scan's path, for messages.
func (s *strictScanner) where() string {
	if p := s.pathString(nil); p != "" {
		return "The field " + Quote(p)
	}
	return "The request body"
}

// jsonKind names what JSON t decodes from.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Struct:
		return "an object"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Array:
		return "an array"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	if t.Kind() >= reflect.Int && t.Kind() <= reflect.Uintptr {
		return "an integer"
	}
	return "a value"
}

// nullableType says whether null decodes into a value of type t as null:
// encoding/json sets a pointer, slice, map or interface to nil, and leaves
// anything else as it was (the zero value), which would make null mean
// the same as 0 or "": those refuse it. A type that decodes itself is asked
// (its UnmarshalJSON gets the null).
func nullableType(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface:
		return true
	}
	return strictTarget(t) == nil
}

func (s *strictScanner) object(t reflect.Type) {
	var (
		fields       *strictFields
		elem         reflect.Type
		elemNullable = true
		seen         map[string]struct{}
		seenFew      [8][]byte
		nSeenFew     int
		present      uint64 // fields[i] seen, for i < 64
		presentMore  []bool // and the rest
	)
	if t != nil {
		switch t.Kind() {
		case reflect.Struct:
			fields = fieldsOf(t)
		case reflect.Map:
			elem = strictTarget(t.Elem())
			elemNullable = nullableType(t.Elem())
		}
	}
	top := s.depth == 0
	s.i++
	for n := 0; ; n++ {
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] == '}' {
			s.i++
			if fields != nil && len(fields.required) > 0 {
				s.requireFields(fields, present, presentMore, top)
			}
			return
		}
		if n > 0 && s.b[s.i] == ',' {
			s.i++
			s.ws()
		}
		key, ok := s.str()
		if !ok {
			return
		}
		// Duplicates: the first few keys are compared in place (no
		// allocation for the usual small body), more in a map.
		dup := false
		if seen == nil {
			for _, k := range seenFew[:nSeenFew] {
				if string(k) == string(key) {
					dup = true
					break
				}
			}
			if nSeenFew < len(seenFew) {
				seenFew[nSeenFew] = key
				nSeenFew++
			} else {
				seen = make(map[string]struct{}, 2*len(seenFew))
				for _, k := range seenFew {
					seen[string(k)] = struct{}{}
				}
				seen[string(key)] = struct{}{}
			}
		} else {
			_, dup = seen[string(key)]
			seen[string(key)] = struct{}{}
		}
		if dup {
			s.err = &Error{Status: 400, Code: CodeDuplicateField,
				Message: fmt.Sprintf("The request body has the field %s more than once; send each field once.", Quote(s.pathString(key)))}
			return
		}
		var (
			vt       reflect.Type
			nullable = true
			field    *strictField
		)
		switch {
		case fields != nil:
			sf, ok := fields.exact[string(key)]
			if !ok && fields.selfDecoding {
				// A type that decodes itself usually hands its keys to
				// encoding/json, which matches them ignoring case.
				if name, found := fields.folded(key); found {
					sf, ok = fields.exact[name], true
				}
			}
			if ok {
				vt, nullable, field = sf.target, sf.nullable, sf
				if sf.index < 64 {
					present |= 1 << sf.index
				} else {
					if presentMore == nil {
						presentMore = make([]bool, len(fields.names))
					}
					presentMore[sf.index] = true
				}
			} else if name, ok := fields.folded(key); ok && !fields.selfDecoding {
				s.err = &Error{Status: 400, Code: CodeUnknownField,
					Message: fmt.Sprintf("The request body has a field %s that matches %s only when case is ignored; field names are case-sensitive.", Quote(s.pathString(key)), Quote(s.pathString([]byte(name))))}
				return
			}
		default:
			vt, nullable = elem, elemNullable
		}
		s.ws()
		if s.i < len(s.b) && s.b[s.i] == ':' {
			s.i++
		}
		s.push(pathSeg{key: key})
		s.value(vt, nullable, field)
		if s.err != nil {
			return
		}
		s.pop()
	}
}

// requireFields refuses an object that lacks a required field of its
// struct (one the URL fills excepted, at the top).
func (s *strictScanner) requireFields(fields *strictFields, present uint64, more []bool, top bool) {
	for _, name := range fields.required {
		i := fields.exact[name].index
		if i < 64 && present&(1<<i) != 0 || i >= 64 && more != nil && more[i] {
			continue
		}
		if top && slices.Contains(s.fromURL, name) {
			continue
		}
		s.err = missingField(s.pathString([]byte(name)))
		return
	}
}

// missingField is the answer to a body without a required field.
func missingField(path string) *Error {
	return &Error{Status: 400, Code: CodeValidationFailed,
		Message: fmt.Sprintf("The field %q is required: send it (a field is optional only when its type is a pointer or its json tag says omitempty).", path)}
}

// str scans a string at s.i and checks its UTF-8 and escapes. It returns
// the string's value: a slice of the body when it has no escapes (the usual
// key), else a new buffer.
func (s *strictScanner) str() ([]byte, bool) {
	start := s.i
	s.i++ // the opening quote
	var (
		out     []byte
		escaped bool
		from    = s.i
	)
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			raw := s.b[from:s.i]
			s.i++
			if !escaped {
				return raw, true
			}
			return append(out, raw...), true
		case c == '\\':
			if !escaped {
				escaped = true
				out = make([]byte, 0, s.i-from+8)
			}
			out = append(out, s.b[from:s.i]...)
			if s.i+1 >= len(s.b) {
				return s.badString(start)
			}
			if s.b[s.i+1] != 'u' {
				out = append(out, unescape(s.b[s.i+1]))
				s.i += 2
				from = s.i
				continue
			}
			r, ok := hex4(s.b, s.i+2)
			if !ok {
				return s.badString(start)
			}
			s.i += 6
			if utf16.IsSurrogate(r) {
				r2, ok := rune(0), false
				if s.i+1 < len(s.b) && s.b[s.i] == '\\' && s.b[s.i+1] == 'u' {
					r2, ok = hex4(s.b, s.i+2)
				}
				dec := utf16.DecodeRune(r, r2)
				if !ok || dec == utf8.RuneError {
					return s.badString(start) // a lone or reversed surrogate
				}
				r = dec
				s.i += 6
			}
			out = utf8.AppendRune(out, r)
			from = s.i
		case c < utf8.RuneSelf:
			s.i++
		default:
			r, size := utf8.DecodeRune(s.b[s.i:])
			if r == utf8.RuneError && size <= 1 {
				return s.badString(start)
			}
			s.i += size
		}
	}
	return s.badString(start)
}

func (s *strictScanner) badString(at int) ([]byte, bool) {
	where := "a string"
	if p := s.pathString(nil); p != "" {
		where = "the field " + Quote(p)
	}
	s.err = &Error{Status: 400, Code: CodeMalformedJSON,
		Message: fmt.Sprintf("The request body has invalid UTF-8 in %s (at byte %d); send text as UTF-8.", where, at)}
	return nil, false
}

func unescape(c byte) byte {
	switch c {
	case 'b':
		return '\b'
	case 'f':
		return '\f'
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	}
	return c // " \ /
}

func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

var (
	jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// strictTarget is the type whose JSON shape the scanner follows for a value
// decoded into t: pointers are looked through; nil means the shape is not
// known (an interface, or a type that decodes itself), so only duplicate keys
// and strings are checked below it.
func strictTarget(t reflect.Type) reflect.Type {
	if t == nil {
		return nil
	}
	if v, ok := strictTargets.Load(t); ok {
		target, _ := v.(reflect.Type)
		return target
	}
	target := strictTargetOf(t)
	strictTargets.Store(t, target)
	return target
}

// strictTargets remembers strictTarget's answer by type (a program has
// finitely many): the Implements checks would otherwise run for every
// value of every body.
var strictTargets sync.Map

func strictTargetOf(t reflect.Type) reflect.Type {
	for t != nil {
		if t.Kind() == reflect.Struct && (t.Implements(jsonUnmarshalerType) || reflect.PointerTo(t).Implements(jsonUnmarshalerType)) {
			return t // its fields are still its schema: see strictFields.selfDecoding
		}
		if t.Implements(jsonUnmarshalerType) || reflect.PointerTo(t).Implements(jsonUnmarshalerType) ||
			t.Implements(textUnmarshalerType) || reflect.PointerTo(t).Implements(textUnmarshalerType) {
			return nil
		}
		switch t.Kind() {
		case reflect.Pointer:
			t = t.Elem()
		case reflect.Interface:
			return nil
		default:
			return t
		}
	}
	return nil
}

// strictFields are the JSON names of a struct type's fields, as
// encoding/json matches them, with what the decoder requires of each.
type strictFields struct {
	exact map[string]*strictField
	names []string // in the order of the type, index of each strictField
	// required are the fields a body must hold: the rule of oke extract's
	// schemas, a field is required unless its type is a pointer, its json
	// tag says omitempty (or omitzero), or it is promoted through an
	// embedded pointer.
	required []string
	// selfDecoding: the type has its own UnmarshalJSON. Its fields are
	// still its schema (required fields and tags hold), but which other
	// keys it accepts is its business: unknown and case-folded keys are
	// not refused.
	selfDecoding bool
	// err is a bad validation tag (reported by App.Handle).
	err error
}

// strictField is one field of a struct.
type strictField struct {
	index    int
	target   reflect.Type // its strictTarget
	nullable bool         // see nullableType
	rules    *constraint.Rules
}

// folded returns the field name key matches when case is ignored.
func (f *strictFields) folded(key []byte) (string, bool) {
	for _, n := range f.names {
		if bytes.EqualFold([]byte(n), key) {
			return n, true
		}
	}
	return "", false
}

var strictFieldCache sync.Map // reflect.Type → *strictFields

func fieldsOf(t reflect.Type) *strictFields {
	if f, ok := strictFieldCache.Load(t); ok {
		return f.(*strictFields)
	}
	f := &strictFields{exact: map[string]*strictField{},
		selfDecoding: t.Implements(jsonUnmarshalerType) || reflect.PointerTo(t).Implements(jsonUnmarshalerType)}
	type found struct {
		depth    int
		required bool
	}
	depth := map[string]found{}
	var walk func(t reflect.Type, d int, viaPtr bool, visited map[reflect.Type]bool)
	walk = func(t reflect.Type, d int, viaPtr bool, visited map[reflect.Type]bool) {
		if visited[t] {
			return
		}
		visited[t] = true
		for i := 0; i < t.NumField(); i++ {
			sf := t.Field(i)
			tag, hasTag := sf.Tag.Lookup("json")
			name, opts, _ := strings.Cut(tag, ",")
			if name == "-" && !strings.HasPrefix(tag, "-,") {
				continue
			}
			if sf.Anonymous && name == "" {
				ft, ptr := sf.Type, false
				if ft.Kind() == reflect.Pointer {
					ft, ptr = ft.Elem(), true
				}
				if ft.Kind() == reflect.Struct {
					walk(ft, d+1, viaPtr || ptr, visited) // promoted fields
					continue
				}
			}
			if !sf.IsExported() {
				continue
			}
			if !hasTag || name == "" {
				name = sf.Name
			}
			if prev, ok := depth[name]; ok && prev.depth <= d {
				continue // the shallower field wins
			}
			omit, asString := false, false
			for _, o := range strings.Split(opts, ",") {
				switch o {
				case "omitempty", "omitzero":
					omit = true
				case "string":
					asString = true
				}
			}
			field := &strictField{index: len(f.names), target: strictTarget(sf.Type), nullable: nullableType(sf.Type)}
			if prev, ok := f.exact[name]; ok {
				field.index = prev.index
			} else {
				f.names = append(f.names, name)
			}
			k, item := constraint.KindOf(sf.Type)
			if asString {
				k, item = constraint.Other, constraint.Other
			}
			rules, err := constraint.Parse(sf.Tag, k, item)
			if err != nil && f.err == nil {
				f.err = fmt.Errorf("field %s (%s): %w", sf.Name, name, err)
			}
			field.rules = rules
			depth[name] = found{d, !omit && !viaPtr && sf.Type.Kind() != reflect.Pointer}
			f.exact[name] = field
		}
		visited[t] = false
	}
	walk(t, 0, false, map[reflect.Type]bool{})
	for _, n := range f.names {
		if depth[n].required {
			f.required = append(f.required, n)
		}
	}
	v, _ := strictFieldCache.LoadOrStore(t, f)
	return v.(*strictFields)
}

// inputRulesError returns the first bad validation tag of the struct types
// a value of type t decodes through (its fields, their elements, …).
func inputRulesError(t reflect.Type) error {
	return rulesError(t, map[reflect.Type]bool{})
}

func rulesError(t reflect.Type, seen map[reflect.Type]bool) error {
	t = strictTarget(t)
	if t == nil || seen[t] {
		return nil
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Slice, reflect.Array, reflect.Map:
		return rulesError(t.Elem(), seen)
	case reflect.Struct:
		fs := fieldsOf(t)
		if fs.err != nil {
			return fmt.Errorf("type %s: %w", t, fs.err)
		}
		for _, n := range fs.names {
			if ft := fs.exact[n].target; ft != nil {
				if err := rulesError(ft, seen); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
