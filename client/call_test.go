package client

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func TestCallDecodesTwoXX(t *testing.T) {
	tests := []struct {
		name  string
		reply reply
		want  charge
	}{
		{"201 JSON body", created, charge{ID: "ch_1", Amount: 1000}},
		{"200 JSON body", jsonReply(200, charge{ID: "ch_2"}), charge{ID: "ch_2"}},
		{"204 leaves Out zero", jsonReply(http.StatusNoContent, nil), charge{}},
		{"empty 200 body leaves Out zero", jsonReply(200, nil), charge{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := setup(t, tt.reply)
			got, meta, err := post.Call(context.Background(), f.c, in1000)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("Out = %+v, want %+v", got, tt.want)
			}
			if meta.Header == nil || meta.Attempts != 1 {
				t.Errorf("meta %+v", meta)
			}
			r := f.requests()[0]
			if ct := r.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			if a := r.Header.Get("Accept"); a != "application/json" {
				t.Errorf("Accept %q", a)
			}
		})
	}
}

func TestCallDecodeErrorKeepsMeta(t *testing.T) {
	f := setup(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte("not json"))
	})
	_, meta, err := post.Call(context.Background(), f.c, in1000)
	if err == nil || !strings.Contains(err.Error(), "decode body") {
		t.Fatalf("err = %v, want a decode error", err)
	}
	// The work was done: the caller needs the key to fetch the stored answer.
	if meta.Status != http.StatusCreated || meta.IdempotencyKey == "" {
		t.Errorf("meta %+v, want status 201 and the key", meta)
	}
}

func TestGETHasNoBody(t *testing.T) {
	f := setup(t, jsonReply(200, map[string]any{"charges": []charge{{ID: "ch_1"}}}))
	type list struct {
		Charges []charge `json:"charges"`
	}
	got, _, err := Call[struct{}, list](context.Background(), f.c, http.MethodGet, "/charges", struct{}{},
		Query(url.Values{"limit": {"10"}}), Query(url.Values{"currency": {"usd"}}))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Charges) != 1 || got.Charges[0].ID != "ch_1" {
		t.Errorf("got %+v", got)
	}
	r := f.requests()[0]
	if r.Body != "" || r.URI != "/charges?currency=usd&limit=10" || r.HasKey {
		t.Errorf("GET sent body %q to %q, key %v", r.Body, r.URI, r.HasKey)
	}

	// A non-empty input on GET would be silently dropped: refuse it.
	_, _, err = Call[chargeIn, charge](context.Background(), f.c, http.MethodGet, "/charges", in1000)
	if err == nil {
		t.Fatal("GET with a non-zero input: no error")
	}
	if _, err := f.c.Do(context.Background(), http.MethodGet, "/charges", []byte("{}")); err == nil {
		t.Fatal("Do GET with a body: no error")
	}
	if n := len(f.requests()); n != 1 {
		t.Errorf("refused calls were sent: %d requests", n)
	}
}

func TestEndpointPathParams(t *testing.T) {
	get := Endpoint[struct{}, charge]{Method: http.MethodGet, Path: "/charges/{id}"}
	tests := []struct {
		name    string
		opts    []CallOption
		wantURI string
		wantErr string
	}{
		{"filled", []CallOption{PathParam("id", "ch_1")}, "/charges/ch_1", ""},
		{"escaped", []CallOption{PathParam("id", "a/b c?")}, "/charges/a%2Fb%20c%3F", ""},
		{"with query", []CallOption{PathParam("id", "ch_1"), Query(url.Values{"expand": {"refunds"}})}, "/charges/ch_1?expand=refunds", ""},
		{"missing", nil, "", "no PathParam for {id}"},
		{"unknown name", []CallOption{PathParam("id", "x"), PathParam("idd", "y")}, "", "no {idd}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := setup(t, jsonReply(200, charge{ID: "ch_1"}))
			_, _, err := get.Call(context.Background(), f.c, struct{}{}, tt.opts...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				if len(f.requests()) != 0 {
					t.Error("sent anyway")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := f.requests()[0].URI; got != tt.wantURI {
				t.Errorf("URI %q, want %q", got, tt.wantURI)
			}
		})
	}
}

func TestHeaders(t *testing.T) {
	f := setup(t, created,
		WithHeader("Authorization", "Bearer user:42"),
		WithHeader("X-Tenant", "acme"),
		WithHeader("X-API-Key", "k_1"))
	if _, _, err := post.Call(context.Background(), f.c, in1000, Header("X-Tenant", "other")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := post.Call(context.Background(), f.c, in1000); err != nil {
		t.Fatal(err)
	}
	reqs := f.requests()
	for i, want := range []string{"other", "acme"} {
		h := reqs[i].Header
		if h.Get("Authorization") != "Bearer user:42" || h.Get("X-API-Key") != "k_1" || h.Get("X-Tenant") != want {
			t.Errorf("call %d headers %v, want X-Tenant %q", i+1, h, want)
		}
	}
}

func TestBaseURL(t *testing.T) {
	f := setup(t, created)
	c, err := New(f.url + "/v1/")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := post.Call(context.Background(), c, in1000); err != nil {
		t.Fatal(err)
	}
	if got := f.requests()[0].URI; got != "/v1/charges" {
		t.Errorf("URI %q, want /v1/charges", got)
	}
	for _, bad := range []string{"", "api.example.com", "ftp://x", "http://x?y=1", "http://"} {
		if _, err := New(bad); err == nil {
			t.Errorf("New(%q): no error", bad)
		}
	}
	if _, err := New("http://x.test", WithHTTPClient(nil)); err == nil {
		t.Error("WithHTTPClient(nil): no error")
	}
	if _, _, err := post.Call(context.Background(), c, in1000, PathParam("x", "y")); err == nil {
		t.Error("unused PathParam: no error")
	}
	if _, err := c.Do(context.Background(), "BAD METHOD", "/x", nil); err == nil {
		t.Error("bad method: no error")
	}
	if _, err := c.Do(context.Background(), http.MethodPost, "charges", nil); err == nil {
		t.Error("path without /: no error")
	}
}

func TestDoReturnsResponseAndError(t *testing.T) {
	f := setup(t, envelope(422, CodeKeyReused, ErrKeyReused.Message))
	resp, err := f.c.Do(context.Background(), http.MethodPost, "/charges", []byte(in1000JSON))
	if !errors.Is(err, ErrKeyReused) {
		t.Fatalf("err = %v", err)
	}
	if resp == nil || resp.Status != 422 || !strings.Contains(string(resp.Body), CodeKeyReused) {
		t.Fatalf("resp = %+v, want the 422 with its body", resp)
	}
}
