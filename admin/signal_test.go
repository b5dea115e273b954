package admin_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/okengine/oke"
	"github.com/okengine/oke/admin"
	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/memory"
)

// TestSignalEndpoint: POST /runs/{id}/signal sends a signal to a run that
// waits for it, the run's view shows the wait and then what it received,
// a repeat with the key delivers once, and the endpoint has the checks of
// every state-changing request (a token, a same-site origin).
func TestSignalEndpoint(t *testing.T) {
	d := memory.New()
	app := oke.New(oke.Config{Driver: d, SweepInterval: -1, Logger: quiet(), PollInterval: 5 * time.Millisecond})
	app.Handle(oke.POST("/wait"), oke.NewFlow("adm.wait", oke.Options{Durable: true},
		func(ctx context.Context, in struct{}, fx *oke.Fx) (oke.Response[string], error) {
			v, ok, err := oke.AwaitSignal[struct{ OK bool }](ctx, "approve", time.Hour)
			if err != nil {
				return oke.Response[string]{}, err
			}
			if !ok || !v.OK {
				return oke.OK("refused"), nil
			}
			return oke.OK("approved"), nil
		}))
	app.HandleHTTP("/_oke/", http.StripPrefix("/_oke", admin.Handler(app, admin.Token(adminTok))))
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(app)
	t.Cleanup(func() { srv.Close(); app.Close(context.Background()) })
	e := &apiEnv{t: t, app: app, srv: srv}

	if w := e.post("/wait", `{}`); w.Code != 204 {
		t.Fatalf("POST /wait: %d %s", w.Code, w.Body)
	}
	runs, _ := d.ListRuns(t.Context(), driver.RunFilter{Flow: "adm.wait"}, 0)
	if len(runs) != 1 {
		t.Fatalf("%d runs", len(runs))
	}
	id := runs[0].ID
	var v admin.RunView
	e.decode("GET", "/_oke/runs/"+id, "", 200, &v)
	if v.Waiting == nil || v.Waiting.Signal != "approve" || v.Waiting.Until.Before(time.Now().Add(50*time.Minute)) {
		t.Fatalf("the view of a waiting run: waiting %+v, want approve for an hour", v.Waiting)
	}

	if status, b := e.call("POST", "/_oke/runs/"+id+"/signal", `{"name":"approve","data":{"OK":true},"key":"k1"}`, "Origin", "http://evil.example"); status != 403 || envelopeCode(t, b) != "Forbidden" {
		t.Fatalf("a signal from a foreign Origin: %d %s, want 403", status, b)
	}
	if status, _ := (adminReq{"POST", "/_oke/runs/" + id + "/signal", []string{"Content-Type", "application/json"}, `{"name":"approve"}`}).send(t, srv.Client(), srv.URL); status.StatusCode != 401 {
		t.Fatalf("a signal without the token: %d, want 401", status.StatusCode)
	}
	e.wantError("POST", "/_oke/runs/"+id+"/signal", `{"data":1}`, 400, oke.CodeInvalidInput)
	e.wantError("POST", "/_oke/runs/run_nobody/signal", `{"name":"approve"}`, 404, "NotFound")
	for range 2 {
		e.decode("POST", "/_oke/runs/"+id+"/signal", `{"name":"approve","data":{"OK":true},"key":"k1"}`, 202, nil)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		v = admin.RunView{}
		e.decode("GET", "/_oke/runs/"+id, "", 200, &v)
		if v.Status == "completed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run did not finish after the signal: %s", v.Status)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if len(v.Signals) != 1 || v.Signals[0].Step != 2 || v.Signals[0].Key != "k1" || v.Waiting != nil {
		t.Fatalf("signals %+v, waiting %+v: want the one signal k1, received by step 2", v.Signals, v.Waiting)
	}
	if len(v.Steps) != 2 || !strings.Contains(v.Steps[1].Name, "outcome") {
		t.Fatalf("steps %+v", v.Steps)
	}
	e.wantError("POST", "/_oke/runs/"+id+"/signal", `{"name":"approve"}`, 409, "RunFinished")
}
