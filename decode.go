package oke

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/okengine/oke/internal/constraint"
)

// Validator is implemented by input types that check themselves after
// decoding. A non-nil error answers 400 ValidationFailed (or the *Error it
// is) and stores nothing.
//
// A Validate method with a pointer receiver may also normalise the input
// (trim, lower-case a currency): the fingerprint is computed from the value
// after validation, so requests that normalise alike are the same request.
type Validator interface {
	Validate() error
}

// paramField is an input struct field that URL parameters can fill.
type paramField struct {
	name  string
	index []int
	rules *constraint.Rules
}

// input is what a request gives a flow's decoder besides its body.
type input struct {
	// params are the path (and, for GET, query) parameters.
	params func(name string) (string, bool)
	// path are the route's path parameter names: fields they fill need
	// not be in the body.
	path []string
	// query: a GET, whose input comes from the URL only; no field is
	// required.
	query bool
	// saved: a journal run's saved input, decoded as it was saved
	// (required fields and tags were checked when it came in).
	saved bool
}

// decodeFunc builds the decoder of flow inputs of type In.
//
// Decoding rules: the body must be exactly one JSON value; unknown object
// fields are rejected (400 UnknownField) so that a typo never silently
// changes what runs — and two bodies that differ only in ignored fields can
// never share a fingerprint. The JSON is read strictly (strictCheck): a
// duplicated key (400 DuplicateField), a key that matches a field only when
// case is ignored (400 UnknownField), invalid UTF-8 (400 MalformedJSON) and
// null for a field that cannot hold it (400 InvalidInput) are refused,
// never merged or repaired. A struct field is required — a body without it
// is 400 ValidationFailed naming it — unless its type is a pointer or its
// json tag says omitempty (or omitzero); an empty body is the zero value
// only when no field is required. The fields' validation tags (minimum,
// maxLength, pattern, enum, …: package internal/constraint) are checked on
// the JSON as sent, 400 ValidationFailed naming the field and the rule.
// oke extract writes the same rules into the OpenAPI document.
//
// Path parameters (and, for GET, query parameters) then fill the struct
// fields whose JSON names match, under the same tags.
func decodeFunc[In any](allowUnknown bool) (func(body []byte, req input) (any, *Error), error) {
	t := reflect.TypeFor[In]()
	if err := inputRulesError(t); err != nil {
		return nil, err
	}
	fields := paramFields(t)
	var required []string
	if st := strictTarget(t); st != nil && st.Kind() == reflect.Struct {
		required = fieldsOf(st).required
	}
	return func(body []byte, req input) (any, *Error) {
		var in In
		switch {
		case len(bytes.TrimSpace(body)) > 0:
			if e := decodeJSON(body, &in, allowUnknown, req); e != nil {
				return nil, e
			}
		case !req.query && !req.saved:
			for _, name := range required {
				if !slices.Contains(req.path, name) {
					return nil, missingField(name)
				}
			}
		}
		if req.params != nil && len(fields) > 0 {
			v := reflect.ValueOf(&in).Elem()
			for _, f := range fields {
				s, ok := req.params(f.name)
				if !ok {
					continue
				}
				if !utf8.ValidString(s) {
					return nil, &Error{Status: 400, Code: CodeInvalidInput,
						Message: fmt.Sprintf("parameter %q is not valid UTF-8; percent-encode UTF-8 text.", f.name)}
				}
				fv := v.FieldByIndex(f.index)
				if err := setFromString(fv, s); err != nil {
					return nil, &Error{Status: 400, Code: CodeInvalidInput,
						Message: fmt.Sprintf("parameter %q: %v", f.name, err)}
				}
				if f.rules != nil {
					if why := paramViolation(f.rules, fv, s); why != "" {
						return nil, &Error{Status: 400, Code: CodeValidationFailed,
							Message: fmt.Sprintf("The parameter %q %s.", f.name, why)}
					}
				}
			}
		}
		if v, ok := any(&in).(Validator); ok {
			if err := v.Validate(); err != nil {
				return nil, validationError(err)
			}
		} else if v, ok := any(in).(Validator); ok {
			if err := v.Validate(); err != nil {
				return nil, validationError(err)
			}
		}
		return in, nil
	}, nil
}

// paramViolation checks a URL parameter s, set into v, against its rules.
func paramViolation(r *constraint.Rules, v reflect.Value, s string) string {
	for v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.String:
		return r.CheckString(s)
	case reflect.Bool:
		return r.CheckBool(v.Bool())
	}
	return r.CheckNumber(strings.TrimSpace(s))
}

func validationError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Status: 400, Code: CodeValidationFailed, Message: err.Error(), Err: err}
}

// decodeJSON decodes exactly one JSON value from body into v (a pointer),
// strictly: see strictCheck.
//
// A number written with a fraction or an exponent that is an integer
// (1.0, 1e2) fills an integer field, as JSON Schema counts it an integer:
// encoding/json refuses it, so it is rewritten as an integer and the body
// decoded again (only on that error: a body of plain integers pays
// nothing).
func decodeJSON(body []byte, v any, allowUnknown bool, req input) *Error {
	var dec *json.Decoder
	for rewrites := 0; ; rewrites++ {
		dec = json.NewDecoder(bytes.NewReader(body))
		if !allowUnknown {
			dec.DisallowUnknownFields()
		}
		err := dec.Decode(v)
		if err == nil {
			break
		}
		if rewrites < 64 {
			if nb, ok := integralNumber(body, err); ok {
				body = nb
				reflect.ValueOf(v).Elem().SetZero()
				continue
			}
		}
		return jsonError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return &Error{Status: 400, Code: CodeMalformedJSON,
			Message: "The request body must hold exactly one JSON value; found more after it."}
	}
	if req.saved {
		return nil
	}
	return strictCheck(body, reflect.TypeOf(v).Elem(), req.path)
}

// integralNumber returns body with the number literal err is about written
// as an integer, when err is encoding/json refusing a literal such as 1.0
// or 1e2 for an integer field and the literal's value is an integer.
func integralNumber(body []byte, err error) ([]byte, bool) {
	var typ *json.UnmarshalTypeError
	if !errors.As(err, &typ) || typ.Type == nil {
		return nil, false
	}
	switch typ.Type.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
	default:
		return nil, false
	}
	lit, ok := strings.CutPrefix(typ.Value, "number ")
	if !ok || !strings.ContainsAny(lit, ".eE") {
		return nil, false
	}
	end := int(typ.Offset)
	if end < len(lit) || end > len(body) || string(body[end-len(lit):end]) != lit {
		return nil, false
	}
	q, ok := new(big.Rat).SetString(lit)
	if !ok || !q.IsInt() || q.Num().BitLen() > 64 {
		return nil, false
	}
	out := make([]byte, 0, len(body))
	out = append(out, body[:end-len(lit)]...)
	out = append(out, q.Num().String()...)
	return append(out, body[end:]...), true
}

func jsonError(err error) *Error {
	var (
		syn *json.SyntaxError
		typ *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &syn):
		return &Error{Status: 400, Code: CodeMalformedJSON,
			Message: fmt.Sprintf("The request body is not valid JSON: %v (at byte %d).", syn, syn.Offset), Err: err}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &Error{Status: 400, Code: CodeMalformedJSON,
			Message: "The request body is not valid JSON: it ends too early.", Err: err}
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "(body)"
		}
		return &Error{Status: 400, Code: CodeInvalidInput,
			Message: fmt.Sprintf("Field %s: want %s, got JSON %s.", Quote(field), typ.Type, typ.Value), Err: err}
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return &Error{Status: 400, Code: CodeUnknownField,
			Message: fmt.Sprintf("The request body has an unknown field %s.", Quote(unquoted(strings.TrimPrefix(err.Error(), "json: unknown field ")))), Err: err}
	}
	return &Error{Status: 400, Code: CodeMalformedJSON,
		Message: fmt.Sprintf("The request body could not be decoded: %v.", err), Err: err}
}

// paramFields lists the exported fields of struct type t (not embedded
// structs' promoted fields) with a settable scalar kind, by JSON name.
func paramFields(t reflect.Type) []paramField {
	if t.Kind() != reflect.Struct {
		return nil
	}
	var out []paramField
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		name := sf.Name
		if tag, ok := sf.Tag.Lookup("json"); ok {
			n, _, _ := strings.Cut(tag, ",")
			if n == "-" {
				continue
			}
			if n != "" {
				name = n
			}
		}
		if !scalarKind(sf.Type) {
			continue
		}
		k, _ := constraint.KindOf(sf.Type)
		rules, _ := constraint.Parse(sf.Tag, k, constraint.Other) // errors: inputRulesError
		out = append(out, paramField{name: name, index: sf.Index, rules: rules})
	}
	return out
}

func scalarKind(t reflect.Type) bool {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String, reflect.Bool,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return true
	}
	return false
}

// integralText is s written as an integer when it is one written with a
// fraction or an exponent ("1.0", "1e2"), else s.
func integralText(s string) string {
	if !strings.ContainsAny(s, ".eE") {
		return s
	}
	if q, ok := new(big.Rat).SetString(s); ok && q.IsInt() && q.Num().BitLen() <= 64 {
		return q.Num().String()
	}
	return s
}

func setFromString(v reflect.Value, s string) error {
	if v.Kind() == reflect.Pointer {
		p := reflect.New(v.Type().Elem())
		if err := setFromString(p.Elem(), s); err != nil {
			return err
		}
		v.Set(p)
		return nil
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("want true or false, got %q", s)
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(integralText(s), 10, v.Type().Bits())
		if err != nil {
			return fmt.Errorf("want an integer, got %q", s)
		}
		v.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, err := strconv.ParseUint(integralText(s), 10, v.Type().Bits())
		if err != nil {
			return fmt.Errorf("want a non-negative integer, got %q", s)
		}
		v.SetUint(n)
	case reflect.Float32, reflect.Float64:
		f, err := strconv.ParseFloat(s, v.Type().Bits())
		if err != nil {
			return fmt.Errorf("want a number, got %q", s)
		}
		v.SetFloat(f)
	default:
		return fmt.Errorf("cannot be set from the URL")
	}
	return nil
}

// unquoted is s without its Go quotes, or s when it is not a quoted string.
func unquoted(s string) string {
	if u, err := strconv.Unquote(s); err == nil {
		return u
	}
	return s
}
