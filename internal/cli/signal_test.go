package cli_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestRunsSignal: oke runs signal sends a signal to a demo refund request
// that waits for its approval, through the admin API (-addr) and on a data
// folder no app holds (-data, picked up when the demo opens it again); a
// repeated key delivers once; runs show prints the wait and the signals.
func TestRunsSignal(t *testing.T) {
	dir := t.TempDir()
	d := openDemo(t, dir)
	n := 0
	request := func() string {
		t.Helper()
		n++
		ch := postJSON(t, d.url+"/charges", `{"amount":500,"currency":"usd"}`, "Idempotency-Key", fmt.Sprintf("cli-signal-charge-%04d", n))
		out := postJSON(t, d.url+"/refund-requests", `{"chargeId":"`+ch["id"].(string)+`"}`)
		return out["id"].(string)
	}
	addr := []string{"-addr", d.url}
	id := request()
	waitFor(t, "the request to wait", func() bool { return showJSON(t, id, addr...).Waiting != nil })
	out, _ := mustRun(t, append([]string{"runs", "show", id}, addr...)...)
	if !strings.Contains(out, `waiting for`) || !strings.Contains(out, `signal "approval"`) {
		t.Fatalf("runs show of a waiting run:\n%s", out)
	}
	for range 2 {
		out, _ = mustRun(t, append([]string{"runs", "signal", "-payload", `{"approved":false,"by":"cli"}`, "-key", "cli-k1", id, "approval"}, addr...)...)
		if !strings.Contains(out, `sent signal "approval" to `+id) {
			t.Fatalf("runs signal: %s", out)
		}
	}
	waitFor(t, "the request to finish", func() bool { return showJSON(t, id, addr...).Status == "completed" })
	v := showJSON(t, id, addr...)
	if len(v.Signals) != 1 || v.Signals[0].Key != "cli-k1" || v.Signals[0].Step == 0 {
		t.Fatalf("signals after two sends with one key: %+v", v.Signals)
	}
	if b, _ := json.Marshal(v.Result.Body); !strings.Contains(string(b), `"refused"`) {
		t.Fatalf("the request's result: %s", b)
	}
	out, _ = mustRun(t, append([]string{"runs", "show", id}, addr...)...)
	if !strings.Contains(out, "RECEIVED BY") || !strings.Contains(out, "cli-k1") {
		t.Fatalf("runs show lists no signals:\n%s", out)
	}
	if code, _, stderr := run(append([]string{"runs", "signal", id, "approval"}, addr...)...); code != 1 || !strings.Contains(stderr, "RunFinished") {
		t.Fatalf("a signal to a finished run: exit %d %s", code, stderr)
	}
	if code, _, stderr := run(append([]string{"runs", "signal", "run_nope", "approval"}, addr...)...); code != 1 || !strings.Contains(stderr, "no such run") {
		t.Fatalf("a signal to a missing run: exit %d %s", code, stderr)
	}
	if code, _, stderr := run(append([]string{"runs", "signal", "-payload", "{nope", id, "approval"}, addr...)...); code != 2 || !strings.Contains(stderr, "-payload must be JSON") {
		t.Fatalf("a bad -payload: exit %d %s", code, stderr)
	}

	// -data: the signal is kept in the folder; the demo, opened again,
	// finishes the run.
	id2 := request()
	waitFor(t, "the second request to wait", func() bool { return showJSON(t, id2, addr...).Waiting != nil })
	d.stop()
	mustRun(t, "runs", "signal", "-data", dir, "-payload", `{"approved":false,"by":"offline"}`, id2, "approval")
	if v := showJSON(t, id2, "-data", dir); len(v.Signals) != 1 || v.Signals[0].Step != 0 {
		t.Fatalf("runs show -data after the send: signals %+v, want the one sent, not received yet", v.Signals)
	}
	d2 := openDemo(t, dir)
	waitFor(t, "the second request to finish", func() bool { return showJSON(t, id2, "-addr", d2.url).Status == "completed" })
}

// postJSON posts body to url and decodes the JSON answer, which must be 2xx.
func postJSON(t *testing.T, url, body string, hdr ...string) map[string]any {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if resp.StatusCode/100 != 2 || json.Unmarshal(b, &out) != nil {
		t.Fatalf("POST %s: %d %s", url, resp.StatusCode, b)
	}
	return out
}
