package spectest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
)

// oapiRuntime is the version of the package oapi-codegen's clients import
// (extract's TestOpenAPIClientCompiles uses the same): the client module
// gets it from the module cache, or the Go module proxy the first time.
const oapiRuntime = "v1.9.0"

// scenarios are Go tests written against the client oapi-codegen generates
// from the demo's document (package client, ClientWithResponses), each in
// a package of its own, so that one that does not compile — the document
// lacks what it uses, e.g. a typed 404 — does not hide the others. They
// call the demo at $OKE_DEMO_URL and check what the document promises,
// through the client's typed fields only.
var scenarios = map[string]string{
	// A charge with a key, its retry (replayed, same body), the key reused
	// with another body (422), a bad body (400) and no key (400).
	"charge": `
func TestCharge(t *testing.T) {
	c := newClient(t)
	key := freshKey("charge")
	in := client.PaymentsChargeJSONRequestBody{Amount: 1250, Currency: "usd"}
	first, err := c.PaymentsChargeWithResponse(ctx, &client.PaymentsChargeParams{IdempotencyKey: key}, in)
	if err != nil {
		t.Fatal(err)
	}
	if first.StatusCode() != 201 || first.JSON201 == nil || first.Headers201 == nil {
		t.Fatalf("create: %d %s, want 201 with a Charge and its headers", first.StatusCode(), first.Body)
	}
	ch := *first.JSON201
	if ch.Id == "" || ch.Amount != 1250 || ch.Currency != "usd" || ch.CreatedAt == "" {
		t.Errorf("the charge %+v", ch)
	}
	if h := first.Headers201; h.Location == nil || *h.Location != "/charges/"+ch.Id {
		t.Errorf("Location %v, want /charges/%s", h.Location, ch.Id)
	}
	if h := first.Headers201; h.IdempotentReplayed != nil && *h.IdempotentReplayed == "true" {
		t.Error("the first answer says Idempotent-Replayed: true")
	}

	again, err := c.PaymentsChargeWithResponse(ctx, &client.PaymentsChargeParams{IdempotencyKey: key}, in)
	if err != nil {
		t.Fatal(err)
	}
	if again.StatusCode() != 201 || again.JSON201 == nil || *again.JSON201 != ch || string(again.Body) != string(first.Body) {
		t.Errorf("retry: %d %s, want the first 201 %s again", again.StatusCode(), again.Body, first.Body)
	}
	if h := again.Headers201; h == nil || h.IdempotentReplayed == nil || *h.IdempotentReplayed != "true" {
		t.Errorf("retry: Idempotent-Replayed %v, want \"true\"", again.HTTPResponse.Header.Values("Idempotent-Replayed"))
	}

	reused, err := c.PaymentsChargeWithResponse(ctx, &client.PaymentsChargeParams{IdempotencyKey: key},
		client.PaymentsChargeJSONRequestBody{Amount: 999, Currency: "usd"})
	if err != nil {
		t.Fatal(err)
	}
	if reused.StatusCode() != 422 || reused.JSON422 == nil || reused.JSON422.Error.Code != "IdempotencyKeyReused" {
		t.Errorf("the key with another body: %d %s, want 422 IdempotencyKeyReused", reused.StatusCode(), reused.Body)
	}

	for _, bad := range []struct{ name, body, code string }{
		{"amount 0", ` + "`" + `{"amount":0,"currency":"usd"}` + "`" + `, "ValidationFailed"},
		{"an unknown field", ` + "`" + `{"amount":1,"currency":"usd","note":"x"}` + "`" + `, "UnknownField"},
		{"a duplicated key", ` + "`" + `{"amount":1,"amount":2,"currency":"usd"}` + "`" + `, "DuplicateField"},
		{"no currency", ` + "`" + `{"amount":1}` + "`" + `, ""},
	} {
		r, err := c.PaymentsChargeWithBodyWithResponse(ctx, &client.PaymentsChargeParams{IdempotencyKey: freshKey("bad")},
			"application/json", strings.NewReader(bad.body))
		if err != nil {
			t.Fatal(err)
		}
		if r.StatusCode() != 400 || r.JSON400 == nil || r.JSON400.Error.Code == "" || (bad.code != "" && string(r.JSON400.Error.Code) != bad.code) {
			t.Errorf("%s: %d %s, want the documented 400 %s", bad.name, r.StatusCode(), r.Body, bad.code)
		}
	}

	// The client always sends a required header; an editor takes it out.
	drop := func(_ context.Context, r *http.Request) error { r.Header.Del("Idempotency-Key"); return nil }
	nokey, err := c.PaymentsChargeWithResponse(ctx, &client.PaymentsChargeParams{IdempotencyKey: freshKey("dropped")}, in, drop)
	if err != nil {
		t.Fatal(err)
	}
	if nokey.StatusCode() != 400 || nokey.JSON400 == nil || nokey.JSON400.Error.Code != "IdempotencyKeyMissing" {
		t.Errorf("no key: %d %s, want 400 IdempotencyKeyMissing", nokey.StatusCode(), nokey.Body)
	}
	empty, err := c.PaymentsChargeWithResponse(ctx, &client.PaymentsChargeParams{}, in)
	if err != nil {
		t.Fatal(err)
	}
	if empty.StatusCode() != 400 || empty.JSON400 == nil || (empty.JSON400.Error.Code != "IdempotencyKeyMissing" && empty.JSON400.Error.Code != "IdempotencyKeyInvalid") {
		t.Errorf("an empty key: %d %s, want 400 IdempotencyKeyMissing or IdempotencyKeyInvalid", empty.StatusCode(), empty.Body)
	}

	got, err := c.PaymentsGetWithResponse(ctx, ch.Id, &client.PaymentsGetParams{})
	if err != nil {
		t.Fatal(err)
	}
	if got.StatusCode() != 200 || got.JSON200 == nil || *got.JSON200 != ch {
		t.Errorf("get: %d %s, want 200 %+v", got.StatusCode(), got.Body, ch)
	}
}
`,
	// A charge that does not exist is the documented 404.
	"notfound": `
func TestNotFound(t *testing.T) {
	c := newClient(t)
	r, err := c.PaymentsGetWithResponse(ctx, "ch_000000000000000000000000", &client.PaymentsGetParams{})
	if err != nil {
		t.Fatal(err)
	}
	if r.StatusCode() != 404 || r.JSON404 == nil || r.JSON404.Error.Code != "NotFound" {
		t.Errorf("%d %s, want the documented 404 NotFound", r.StatusCode(), r.Body)
	}
}
`,
	// A refund of a charge, and a second refund of it under another key:
	// the declared 409 AlreadyRefunded.
	"refund": `
func TestRefund(t *testing.T) {
	c := newClient(t)
	ch, err := c.PaymentsChargeWithResponse(ctx, &client.PaymentsChargeParams{IdempotencyKey: freshKey("refund-charge")},
		client.PaymentsChargeJSONRequestBody{Amount: 700, Currency: "eur"})
	if err != nil || ch.JSON201 == nil {
		t.Fatalf("charge: %v %s", err, ch.Body)
	}
	k1, k2 := freshKey("refund-1"), freshKey("refund-2")
	r, err := c.PaymentsRefundWithResponse(ctx, &client.PaymentsRefundParams{IdempotencyKey: &k1}, client.RefundIn{ChargeId: ch.JSON201.Id})
	if err != nil {
		t.Fatal(err)
	}
	if r.StatusCode() != 201 || r.JSON201 == nil || r.JSON201.ChargeId != ch.JSON201.Id || r.JSON201.Amount != 700 {
		t.Fatalf("refund: %d %s, want 201 with the Refund", r.StatusCode(), r.Body)
	}
	twice, err := c.PaymentsRefundWithResponse(ctx, &client.PaymentsRefundParams{IdempotencyKey: &k2}, client.RefundIn{ChargeId: ch.JSON201.Id})
	if err != nil {
		t.Fatal(err)
	}
	if twice.StatusCode() != 409 || twice.JSON409 == nil || twice.JSON409.Error.Code != "AlreadyRefunded" {
		t.Errorf("second refund: %d %s, want the declared 409 AlreadyRefunded", twice.StatusCode(), twice.Body)
	}
}
`,
	// The declared failure of demo.fail is its own documented status.
	"declared": `
func TestDeclaredFailure(t *testing.T) {
	c := newClient(t)
	k := freshKey("declared")
	r, err := c.DemoFailWithResponse(ctx, &client.DemoFailParams{IdempotencyKey: &k}, client.FailIn{When: "declared"})
	if err != nil {
		t.Fatal(err)
	}
	if r.StatusCode() != 402 || r.JSON402 == nil || r.JSON402.Error.Code != "PaymentDeclined" {
		t.Errorf("%d %s, want the documented 402 PaymentDeclined", r.StatusCode(), r.Body)
	}
}
`,
	// A webhook delivered twice: the second is the first answer, replayed.
	"webhook": `
func TestWebhookRedelivery(t *testing.T) {
	c := newClient(t)
	ev := client.DemoWebhookJSONRequestBody{Id: freshKey("evt_"), Type: "charge.succeeded"}
	first, err := c.DemoWebhookWithResponse(ctx, &client.DemoWebhookParams{}, ev)
	if err != nil {
		t.Fatal(err)
	}
	if first.StatusCode() != 200 || first.JSON200 == nil || !first.JSON200.Received || first.JSON200.Id != ev.Id {
		t.Fatalf("first delivery: %d %s", first.StatusCode(), first.Body)
	}
	again, err := c.DemoWebhookWithResponse(ctx, &client.DemoWebhookParams{}, ev)
	if err != nil {
		t.Fatal(err)
	}
	if again.StatusCode() != 200 || string(again.Body) != string(first.Body) {
		t.Errorf("redelivery: %d %s, want the first answer %s", again.StatusCode(), again.Body, first.Body)
	}
	if h := again.Headers200; h == nil || h.IdempotentReplayed == nil || *h.IdempotentReplayed != "true" {
		t.Errorf("redelivery: Idempotent-Replayed %v, want the documented \"true\"", again.HTTPResponse.Header.Values("Idempotent-Replayed"))
	}
}
`,
}

// scenarioHelpers is the top of every scenario's file.
const scenarioHelpers = `package scenario

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"example.com/democlient/client"
)

var (
	ctx  = context.Background()
	_    = strings.NewReader
	_    = http.MethodGet
	keyN atomic.Int64
	run  = time.Now().UnixNano()
)

// freshKey is an Idempotency-Key no other call of the run uses.
func freshKey(what string) string {
	return fmt.Sprintf("%s-%x-%04d-0123456789", what, run, keyN.Add(1))
}

func newClient(t *testing.T) *client.ClientWithResponses {
	url := os.Getenv("OKE_DEMO_URL")
	if url == "" {
		t.Fatal("OKE_DEMO_URL is not set")
	}
	c, err := client.NewClientWithResponses(url)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
`

// The client oapi-codegen (an independent generator) writes from the
// demo's document builds, and its calls to the running demo get what the
// document says, read through the client's typed fields: a charge's
// retry replayed, a reused key 422, bad bodies the documented 400, a
// missing charge the documented 404, a second refund the declared 409
// AlreadyRefunded, demo.fail's declared 402, a webhook redelivery
// replayed. Each scenario is a package of its own (scenarios).
func TestOapiCodegenClientAgainstTheDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds a module with the go command")
	}
	doc := loadSpec(t)
	src, err := codegen.Generate(doc, codegen.Configuration{
		PackageName: "client",
		Generate:    codegen.GenerateOptions{Client: true, Models: true},
	})
	if err != nil {
		t.Fatalf("oapi-codegen: %v", err)
	}
	base := startDemo(t)
	dir := t.TempDir()
	sum, err := os.ReadFile("../../../go.sum")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"go.mod":           "module example.com/democlient\n\ngo 1.24\n\nrequire github.com/oapi-codegen/runtime " + oapiRuntime + "\n",
		"go.sum":           string(sum),
		"client/client.go": src,
	}
	for name, body := range scenarios {
		files[name+"/"+name+"_test.go"] = scenarioHelpers + body
	}
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	goCmd := func(args ...string) (string, error) {
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off", "OKE_DEMO_URL="+base)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := goCmd("mod", "tidy", "-e"); err != nil {
		t.Fatalf("go mod tidy: %v\n%s", err, out)
	}
	if out, err := goCmd("vet", "./client"); err != nil {
		t.Fatalf("the generated client does not build: %v\n%s", err, out)
	}
	for _, name := range sortedKeys(scenarios) {
		t.Run(name, func(t *testing.T) {
			out, err := goCmd("test", "-count=1", "./"+name)
			if err != nil {
				t.Errorf("go test ./%s against the demo: %v\n%s", name, err, strings.TrimSpace(out))
			}
		})
	}
}
