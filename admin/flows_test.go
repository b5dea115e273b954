package admin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/okengine/oke"
	"github.com/okengine/oke/admin"
	"github.com/okengine/oke/driver/memory"
)

// TestFlowsClaimOnlyWhereAKeyIsClaimed: GET /_oke/flows reports a flow's
// claim strategy only for a flow that claims keys — one with a route that
// honors the Idempotency-Key header, or a webhook that dedupes on its
// payload — never for a GET flow or one whose header is off.
func TestFlowsClaimOnlyWhereAKeyIsClaimed(t *testing.T) {
	app := oke.New(oke.Config{Driver: memory.New(), SweepInterval: -1, Logger: quiet()})
	type in struct{ ID string }
	do := func(ctx context.Context, in in, fx *oke.Fx) (oke.Response[string], error) { return oke.OK("x"), nil }
	writes := []oke.Effect{oke.EffectWrite}
	app.Handle(oke.GET("/things/{ID}"), oke.NewFlow("t.get", oke.Options{}, do))
	app.Handle(oke.POST("/things"), oke.NewFlow("t.post", oke.Options{Effects: writes}, do))
	app.Handle(oke.Webhook("/hooks", "ID"), oke.NewFlow("t.hook", oke.Options{Effects: writes}, do))
	app.Handle(oke.POST("/off"), oke.NewFlow("t.off", oke.Options{Effects: writes, Idempotency: oke.Idempotency{Mode: oke.ModeOff}}, do))
	app.HandleHTTP("/_oke/", http.StripPrefix("/_oke", admin.Handler(app, admin.Token(adminTok))))
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Close(context.Background()) })
	srv := httptest.NewServer(app)
	defer srv.Close()
	resp, body := adminReq{"GET", "/_oke/flows", []string{"Authorization", "Bearer " + adminTok}, ""}.send(t, srv.Client(), srv.URL)
	if resp.StatusCode != 200 {
		t.Fatalf("GET /_oke/flows: %d %s", resp.StatusCode, body)
	}
	var out struct{ Flows []map[string]any }
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"t.get": nil, "t.post": "first", "t.hook": "first", "t.off": nil}
	for _, f := range out.Flows {
		name := f["name"].(string)
		w, ok := want[name]
		if !ok {
			continue
		}
		delete(want, name)
		if got, has := f["claim"]; got != w || (w == nil && has) {
			t.Errorf("flow %s: claim %v (present %v), want %v", name, got, has, w)
		}
	}
	if len(want) > 0 {
		t.Errorf("flows not listed: %v", want)
	}
}
