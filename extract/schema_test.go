package extract_test

import (
	"encoding/json"
	"reflect"
	"testing"
)

// The JSON Schema of a Go type follows encoding/json: tags, omitempty, "-",
// unexported fields, embedded structs (through a pointer: optional),
// pointers, slices and maps that may be null, time.Time, json.RawMessage,
// any, ,string, []byte, arrays, and a named type by reference (itself
// included). Required are the fields oke's decoder requires: not a pointer,
// not omitempty; no other property is allowed (the decoder refuses unknown
// fields).
func TestSchemaFromGoTypes(t *testing.T) {
	f := flowNamed(t, run(t, "./testdata/flows"), "fixture.shapes")
	want := `{
	  "$schema": "https://json-schema.org/draft/2020-12/schema",
	  "$ref": "#/$defs/Shapes",
	  "$defs": {"Shapes": {
	    "description": "Shapes has a field of every kind extract writes a schema for.",
	    "type": "object",
	    "additionalProperties": false,
	    "properties": {
	      "kind": {"type": "string"},
	      "Seq": {"type": "integer", "format": "int64", "description": "no tag: the Go name"},
	      "note": {"type": "string"},
	      "name": {"type": "string", "description": "a required string"},
	      "nick": {"type": "string", "description": "optional"},
	      "age": {"type": ["integer", "null"], "format": "int64", "description": "nullable"},
	      "tags": {"type": ["array", "null"], "items": {"type": "string"}, "description": "array or null"},
	      "scores": {"type": ["object", "null"], "additionalProperties": {"type": "integer", "minimum": 0, "maximum": 65535}, "description": "object or null"},
	      "at": {"type": "string", "format": "date-time", "description": "a date-time string"},
	      "raw": {"description": "anything"},
	      "any": {"description": "anything"},
	      "count": {"type": "string"},
	      "data": {"type": ["string", "null"], "contentEncoding": "base64"},
	      "children": {"type": ["array", "null"], "items": {"$ref": "#/$defs/Shapes"}, "description": "a reference to itself"},
	      "pair": {"type": "array", "items": {"type": "number", "format": "double"}, "minItems": 2, "maxItems": 2},
	      "wait": {"type": "integer", "description": "a duration in nanoseconds"}
	    },
	    "required": ["kind", "Seq", "name", "tags", "scores", "at", "raw", "any", "count", "data", "children", "pair", "wait"]
	  }}
	}`
	var got, exp any
	if err := json.Unmarshal(f.Input, &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(want), &exp); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, exp) {
		t.Errorf("input schema:\n%s\nwant:\n%s", jsonString(got), jsonString(exp))
	}
}
