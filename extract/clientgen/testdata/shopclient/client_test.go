package shopclient_test

// The generated client of the shop and depot fixtures against a recording
// server: what each method sends. extract/clientgen's TestFixtureClient
// regenerates oke_client_gen.go, checks it against this package's copy,
// then runs these tests with go vet and go test.

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/okengine/oke/client"
	"github.com/okengine/oke/extract/clientgen/testdata/shop"
	"github.com/okengine/oke/extract/clientgen/testdata/shopclient"
)

type seen struct {
	method, uri, key, body string
	hasKey                 bool
}

// setup serves answer (status, JSON body) for every request and records
// them.
func setup(t *testing.T, status int, body string, opts ...client.Option) (*shopclient.Client, func() []seen) {
	t.Helper()
	var (
		mu   sync.Mutex
		reqs []seen
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		_, hasKey := r.Header["Idempotency-Key"]
		mu.Lock()
		reqs = append(reqs, seen{r.Method, r.URL.RequestURI(), r.Header.Get("Idempotency-Key"), string(b), hasKey})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	api, err := shopclient.New(srv.URL, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return api, func() []seen {
		mu.Lock()
		defer mu.Unlock()
		return append([]seen(nil), reqs...)
	}
}

func TestRequiredFlowAlwaysSendsAKey(t *testing.T) {
	api, reqs := setup(t, 201, `{"id":"it_1","name":"lamp","price":30,"added":"2025-01-02T03:04:05Z"}`)
	ctx := context.Background()
	it, meta, err := api.Shop.Create(ctx, shop.CreateIn{Name: "lamp", Price: 30})
	if err != nil || it.ID != "it_1" || it.Added.Year() != 2025 {
		t.Fatalf("Create = %+v, %v", it, err)
	}
	if _, _, err := api.Shop.CreateRPC(ctx, shop.CreateIn{Name: "lamp", Price: 30}, client.Key("my-own-key-0123456789")); err != nil {
		t.Fatal(err)
	}
	_, _, err = api.Shop.Create(ctx, shop.CreateIn{Name: "lamp"}, client.NoKey())
	if !errors.Is(err, client.ErrKeyMissing) || !strings.Contains(err.Error(), "flow shop.create requires an Idempotency-Key") {
		t.Errorf("NoKey: err %v, want ErrKeyMissing naming shop.create", err)
	}
	got := reqs()
	if len(got) != 2 {
		t.Fatalf("%d requests, want 2 (NoKey sends nothing)", len(got))
	}
	if got[0].method != "POST" || got[0].uri != "/items" || got[0].key == "" || got[0].key != meta.IdempotencyKey || got[0].body != `{"name":"lamp","price":30}` {
		t.Errorf("Create sent %+v", got[0])
	}
	if got[1].uri != "/rpc/shop.create" || got[1].key != "my-own-key-0123456789" {
		t.Errorf("CreateRPC sent %+v", got[1])
	}
}

func TestGETsFillPathAndQueryAndSendNoKey(t *testing.T) {
	api, reqs := setup(t, 200, `{}`)
	ctx := context.Background()
	min := int64(0)
	calls := []func() error{
		func() error { _, _, err := api.Shop.Get(ctx, shop.GetIn{ID: "it 1"}); return err },
		func() error {
			_, _, err := api.Shop.Search(ctx, shop.SearchIn{Q: "lamp", MinPrice: &min, InStock: true, Kind: "desk"})
			return err
		},
		func() error { _, _, err := api.Shop.Search(ctx, shop.SearchIn{}); return err },
		func() error { _, _, err := api.Shop.File(ctx, "s1", shop.FileIn{Path: "a/b c.txt"}); return err },
		func() error { _, _, err := api.Shop.Dims(ctx, shop.GetIn{ID: "it_1"}); return err },
		func() error { _, _, err := api.Depot.List(ctx, shopclient.ListIn{Cursor: "c_9", Limit: 5}); return err },
		func() error { _, _, err := api.Health(ctx); return err },
	}
	for i, call := range calls {
		if err := call(); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	want := []string{
		"/items/it%201",
		"/items?inStock=true&kind=desk&minPrice=0&q=lamp",
		"/items",
		"/shelves/s1/files/a/b%20c.txt",
		"/items/it_1/dims",
		"/crates?cursor=c_9&limit=5",
		"/healthz",
	}
	got := reqs()
	for i, w := range want {
		if got[i].method != "GET" || got[i].uri != w || got[i].hasKey || got[i].body != "" {
			t.Errorf("call %d sent %+v, want GET %s with no key and no body", i, got[i], w)
		}
	}
	if _, _, err := api.Shop.Get(ctx, shop.GetIn{ID: "x"}, client.Key("my-own-key-0123456789")); err == nil || !strings.Contains(err.Error(), "shop.get does not honor the Idempotency-Key header") {
		t.Errorf("Key on a GET: %v, want a refusal naming shop.get", err)
	}
}

// A POST that only reads sends no key, and is retried all the same.
func TestReadOnlyPOSTSendsNoKeyAndIsRetried(t *testing.T) {
	api, reqs := setup(t, 503, `{"error":{"code":"Unavailable","message":"down"}}`,
		client.WithRetry(client.Retry{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond}))
	_, meta, err := api.Shop.SearchPost(context.Background(), shop.SearchIn{Q: "lamp", Tags: []string{"new"}})
	if !errors.Is(err, client.ErrUnavailable) || meta.Attempts != 3 {
		t.Fatalf("err %v, meta %+v: want 3 attempts then the 503", err, meta)
	}
	for _, r := range reqs() {
		if r.method != "POST" || r.uri != "/search" || r.hasKey || !strings.Contains(r.body, `"tags":["new"]`) {
			t.Errorf("SearchPost sent %+v, want POST /search with the body and no key", r)
		}
	}
}

// A PUT with a path parameter sends the input as its body too, under a
// fresh key; a 204 gives just the Meta.
func TestPUTWithPathParameter(t *testing.T) {
	api, reqs := setup(t, 204, ``)
	meta, err := api.Shop.Tag(context.Background(), shop.TagIn{ItemID: "it/1", Tag: "sale"})
	if err != nil || meta.Status != 204 {
		t.Fatalf("Tag: %+v, %v", meta, err)
	}
	r := reqs()[0]
	if r.method != "PUT" || r.uri != "/items/it%2F1/tags" || r.key == "" || r.body != `{"itemId":"it/1","tag":"sale"}` {
		t.Errorf("Tag sent %+v", r)
	}
}

// The depot's types are copies: they encode as the originals do.
func TestCopiedTypesKeepTheJSON(t *testing.T) {
	api, reqs := setup(t, 201, `{"id":"cr_1","created":"2025-01-02T03:04:05Z","note":"fragile","label":"books","price":{"amount":5},"attrs":null,"code":"AB","raw":{"any":[1]},"Weight":2.5}`)
	in := shopclient.StoreIn{Keep: true, Crate: shopclient.Crate{
		Base:  shopclient.Base{ID: "cr_1"},
		Meta:  &shopclient.Meta{Note: "fragile"},
		Label: "books", Price: shopclient.Money{Amount: 5},
		Parts: []shopclient.Crate{{Label: "inner", Code: "CD", Raw: json.RawMessage(`1`)}},
		Code:  "AB", Raw: json.RawMessage(`{"any":[1]}`),
	}}
	out, _, err := api.Depot.Store(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if out.ID != "cr_1" || out.Note != "fragile" || out.Weight != 2.5 || string(out.Raw) != `{"any":[1]}` || out.Created.Year() != 2025 {
		t.Errorf("decoded %+v", out)
	}
	const want = `{"crate":{"id":"cr_1","created":"0001-01-01T00:00:00Z","note":"fragile","label":"books","price":{"amount":5},"parts":[{"id":"","created":"0001-01-01T00:00:00Z","label":"inner","price":{"amount":0},"attrs":null,"code":"CD","raw":1}],"attrs":null,"code":"AB","raw":{"any":[1]}},"keep":true}`
	if got := reqs()[0].body; got != want {
		t.Errorf("body\n%s\nwant\n%s", got, want)
	}
}

func TestStreamsReturnTheResponse(t *testing.T) {
	api, reqs := setup(t, 200, "{\"line\":1}\n")
	resp, meta, err := api.Shop.Export(context.Background(), shop.CreateIn{Name: "x"})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "{\"line\":1}\n" || meta.IdempotencyKey != "" {
		t.Errorf("Export: %q, meta %+v", b, meta)
	}
	feed, _, err := api.Shop.Feed(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	feed.Body.Close()
	got := reqs()
	if got[0].method != "POST" || got[0].uri != "/export" || got[0].hasKey || got[1].method != "GET" || got[1].uri != "/feed" {
		t.Errorf("sent %+v", got)
	}
}
