package file

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/okengine/oke/driver"
)

// recordDiff says how a and b differ, or "" if they are the same record.
func recordDiff(a, b *record) string {
	if a == nil || b == nil {
		if a == b {
			return ""
		}
		return fmt.Sprintf("%v vs %v", a, b)
	}
	ka, kb := a.Key, b.Key
	if (ka == nil) != (kb == nil) || (ka != nil && *ka != *kb) {
		return fmt.Sprintf("key %v vs %v", ka, kb)
	}
	if a.Op != b.Op || a.V != b.V || a.Gen != b.Gen || a.Prev != b.Prev || a.Fingerprint != b.Fingerprint || a.State != b.State ||
		a.Owner != b.Owner || a.RunID != b.RunID {
		return fmt.Sprintf("fields %+v vs %+v", *a, *b)
	}
	for _, t := range [][2]time.Time{
		{a.LeaseUntil, b.LeaseUntil}, {a.ExpiresAt, b.ExpiresAt},
		{a.CreatedAt, b.CreatedAt}, {a.CompletedAt, b.CompletedAt},
	} {
		if !t[0].Equal(t[1]) {
			return fmt.Sprintf("time %v vs %v", t[0], t[1])
		}
	}
	ra, rb := a.Response, b.Response
	if (ra == nil) != (rb == nil) {
		return fmt.Sprintf("response %v vs %v", ra, rb)
	}
	if ra != nil && (ra.Status != rb.Status || ra.ContentType != rb.ContentType || ra.Location != rb.Location ||
		!bytes.Equal(ra.Body, rb.Body) || (ra.Body == nil) != (rb.Body == nil)) {
		return fmt.Sprintf("response %+v vs %+v", *ra, *rb)
	}
	return ""
}

func viaJSON(t *testing.T, payload []byte) *record {
	t.Helper()
	var r record
	if err := json.Unmarshal(payload, &r); err != nil {
		t.Fatalf("json.Unmarshal(%s): %v", payload, err)
	}
	return &r
}

func sampleRecords() []*record {
	k := driver.Key{Tenant: "acme", Principal: "user:42", Flow: "payments.charge", Key: "idem-key-0000-0001"}
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC)
	return []*record{
		formatRecord("0123456789abcdef", "fedcba9876543210"),
		delRecord(k),
		{Op: opPut, Key: &k, Fingerprint: "ab", State: "running", Owner: "o", LeaseUntil: t0, ExpiresAt: t0, CreatedAt: t0},
		{Op: opPut, Key: &k, State: "completed", CreatedAt: t0, CompletedAt: t0.Add(time.Second), RunID: "run-1",
			Response: &driver.Response{Status: 201, ContentType: "application/json", Location: "/x", Body: []byte{0, 1, 2, 0xff}}},
		{Op: opPut, Key: &driver.Key{Tenant: "é\"\\\n\t\x01\u2028<>&", Principal: "\xff\xfe", Flow: "日本", Key: ""},
			State: "completed", Response: &driver.Response{Status: 0}},
		{Op: opPut, Key: &k, State: "completed", LeaseUntil: time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600)),
			Response: &driver.Response{Status: -1, Body: []byte{}}},
		formatRecord("", ""), // an older oke's
	}
}

func TestPayloadDecodesLikeJSON(t *testing.T) {
	for i, r := range sampleRecords() {
		payload, err := appendPayload(nil, r)
		if err != nil {
			t.Fatal(err)
		}
		// What encoding/json makes of the record is the reference.
		ref, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		want := viaJSON(t, ref)
		if d := recordDiff(viaJSON(t, payload), want); d != "" {
			t.Errorf("record %d: json.Unmarshal(appendPayload) differs from json: %s\n%s\n%s", i, d, payload, ref)
		}
		got, err := decode(payload)
		if err != nil {
			t.Fatalf("record %d: decode: %v", i, err)
		}
		if d := recordDiff(got, want); d != "" {
			t.Errorf("record %d: decode differs from json: %s", i, d)
		}
	}
}

func TestEncodeRejectsWhatJSONRejects(t *testing.T) {
	r := &record{Op: opPut, ExpiresAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}
	if _, err := json.Marshal(r); err == nil {
		t.Fatal("json.Marshal accepted year 10000")
	}
	if _, err := appendRecord(nil, r, nil); err == nil {
		t.Error("appendRecord accepted year 10000, which json cannot read back")
	}
}

func TestDecodeFastTakesWhatWeWrite(t *testing.T) {
	// The fast path must not fall back for ordinary rows, or Open is slow.
	for i, r := range sampleRecords()[:4] {
		payload, _ := appendPayload(nil, r)
		if _, ok := decodeFast(payload); !ok {
			t.Errorf("record %d: decodeFast fell back for %s", i, payload)
		}
	}
}

func FuzzEncode(f *testing.F) {
	f.Add("acme", "user:1", "payments.charge", "idem-key-0001", "running", "owner", "run", "application/json", "/x", []byte("body"), int64(1e18), 201)
	f.Add("\xff", "\"\\", "\u2028", "\x00", "", "", "", "", "", []byte{}, int64(-1), -5)
	f.Fuzz(func(t *testing.T, tenant, principal, flow, key, state, owner, run, ct, loc string, body []byte, nanos int64, status int) {
		ts := time.Unix(0, nanos).UTC()
		r := &record{Op: opPut, Key: &driver.Key{Tenant: tenant, Principal: principal, Flow: flow, Key: key},
			Fingerprint: key + flow, State: state, Owner: owner, LeaseUntil: ts, CreatedAt: ts.Add(time.Hour), RunID: run,
			Response: &driver.Response{Status: status, ContentType: ct, Location: loc, Body: body}}
		payload, err := appendPayload(nil, r)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		want := viaJSON(t, ref)
		if d := recordDiff(viaJSON(t, payload), want); d != "" {
			t.Fatalf("json.Unmarshal(appendPayload) differs: %s", d)
		}
		got, err := decode(payload)
		if err != nil {
			t.Fatal(err)
		}
		if d := recordDiff(got, want); d != "" {
			t.Fatalf("decode differs: %s", d)
		}
	})
}

func FuzzDecodeFast(f *testing.F) {
	for _, r := range sampleRecords() {
		p, _ := appendPayload(nil, r)
		f.Add(p)
	}
	f.Add([]byte(`{"op":"put","v":01}`))
	f.Add([]byte(`{"op":"put","response":{"status":1,"body":""}}`))
	f.Fuzz(func(t *testing.T, payload []byte) {
		fast, ok := decodeFast(payload)
		if !ok {
			return
		}
		var ref record
		if err := json.Unmarshal(payload, &ref); err != nil {
			t.Fatalf("decodeFast accepted %q, which json rejects: %v", payload, err)
		}
		if d := recordDiff(fast, &ref); d != "" {
			t.Fatalf("decodeFast(%q) differs from json: %s", payload, d)
		}
	})
}
