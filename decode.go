package oke

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
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
}

// decodeFunc builds the decoder of flow inputs of type In.
//
// Decoding rules: an empty body is the zero value; otherwise the body must be
// exactly one JSON value; unknown object fields are rejected (400
// UnknownField) so that a typo never silently changes what runs — and two
// bodies that differ only in ignored fields can never share a fingerprint.
// The JSON is read strictly (strictCheck): a duplicated key (400
// DuplicateField), a key that matches a field only when case is ignored (400
// UnknownField) and invalid UTF-8 (400 MalformedJSON) are refused, never
// merged or repaired.
// Path parameters (and, for GET, query parameters) then fill the struct
// fields whose JSON names match.
func decodeFunc[In any](allowUnknown bool) func(body []byte, params func(string) (string, bool)) (any, *Error) {
	t := reflect.TypeFor[In]()
	fields := paramFields(t)
	return func(body []byte, params func(string) (string, bool)) (any, *Error) {
		var in In
		if len(bytes.TrimSpace(body)) > 0 {
			if e := decodeJSON(body, &in, allowUnknown); e != nil {
				return nil, e
			}
		}
		if params != nil && len(fields) > 0 {
			v := reflect.ValueOf(&in).Elem()
			for _, f := range fields {
				s, ok := params(f.name)
				if !ok {
					continue
				}
				if !utf8.ValidString(s) {
					return nil, &Error{Status: 400, Code: CodeInvalidInput,
						Message: fmt.Sprintf("parameter %q is not valid UTF-8; percent-encode UTF-8 text.", f.name)}
				}
				if err := setFromString(v.FieldByIndex(f.index), s); err != nil {
					return nil, &Error{Status: 400, Code: CodeInvalidInput,
						Message: fmt.Sprintf("parameter %q: %v", f.name, err)}
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
	}
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
func decodeJSON(body []byte, v any, allowUnknown bool) *Error {
	dec := json.NewDecoder(bytes.NewReader(body))
	if !allowUnknown {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return &Error{Status: 400, Code: CodeMalformedJSON,
			Message: "The request body must hold exactly one JSON value; found more after it."}
	}
	return strictCheck(body, reflect.TypeOf(v).Elem())
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
			Message: fmt.Sprintf("Field %q: want %s, got JSON %s.", field, typ.Type, typ.Value), Err: err}
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return &Error{Status: 400, Code: CodeUnknownField,
			Message: fmt.Sprintf("The request body has an unknown field %s.", strings.TrimPrefix(err.Error(), "json: unknown field ")), Err: err}
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
		out = append(out, paramField{name: name, index: sf.Index})
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
		n, err := strconv.ParseInt(s, 10, v.Type().Bits())
		if err != nil {
			return fmt.Errorf("want an integer, got %q", s)
		}
		v.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, err := strconv.ParseUint(s, 10, v.Type().Bits())
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
