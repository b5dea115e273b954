package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/okengine/oke"
	"github.com/okengine/oke/admin"
	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/file"
)

// source is where the runs and idempotency commands read: a running app's
// admin API (-addr), or a store opened with its driver: a data folder with
// the file driver (-data), a Postgres database with the Postgres driver
// (-postgres).
type source interface {
	// listRuns returns a page of runs, and whether more follow it.
	listRuns(ctx context.Context, f runFilter) (runs []admin.RunView, more bool, err error)
	getRun(ctx context.Context, id string) (admin.RunView, error)
	// replay starts a new run from run id's input, reusing the saved
	// results of its steps 1..from-1, and returns its ID.
	replay(ctx context.Context, id string, from int) (string, error)
	// cancel fails a sleeping or waiting run (oke.App.Cancel).
	cancel(ctx context.Context, id string) (admin.RunView, error)
	// resume makes a dead-lettered run due again (oke.App.Resume).
	resume(ctx context.Context, id string) (admin.RunView, error)
	// signal sends a signal to a run (oke.App.Signal).
	signal(ctx context.Context, id string, req admin.SignalRequest) error
	// listRows returns up to limit rows in key order after the key after
	// (none: from the first), and whether more follow them.
	listRows(ctx context.Context, after driver.Key, limit int) (rows []admin.RowView, more bool, err error)
	// findRows returns the rows of key.Key in every scope that key's other
	// fields (when not empty) allow, bodies hidden.
	findRows(ctx context.Context, key driver.Key) ([]admin.RowView, error)
	// getRow returns one row, its stored body only when reveal is set.
	getRow(ctx context.Context, key driver.Key, reveal bool) (admin.RowView, error)
	// deleteRow deletes one row; a row still in flight only with force
	// (admin.DeleteRow's rule), else an error that is admin.ErrRowInProgress.
	deleteRow(ctx context.Context, key driver.Key, force bool) error
	// sweepBatch deletes up to n expired rows in one batch.
	sweepBatch(ctx context.Context, n int) (int, error)
	close() error
}

type runFilter struct {
	flow, status, after, before, tenant string
	createdAfter, createdBefore         time.Time
	desc                                bool
	limit                               int
}

// errNoRow is returned for an idempotency row that does not exist.
var errNoRow = errors.New("no such idempotency row")

// errNoRun is returned for a run ID that does not exist.
var errNoRun = errors.New("no such run")

// DefaultAddr is where the commands look for an app when none of -addr,
// -data and -postgres is given: the demo's default address.
const DefaultAddr = "http://127.0.0.1:8080"

// AdminPath is where an app mounts oke's admin.Handler unless -addr names
// another path (the demo mounts it there).
const AdminPath = "/_oke"

// usageError is a command-line mistake: exit 2.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// httpSource reads a running app's admin API.
type httpSource struct {
	base   string // e.g. http://127.0.0.1:8080/_oke
	token  string // the admin token, sent as a bearer token
	client *http.Client
}

func newHTTPSource(addr, token string) (*httpSource, error) {
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, &usageError{fmt.Errorf("-addr must be an http(s) URL such as %s, got %q", DefaultAddr, addr)}
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = AdminPath
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawQuery, u.Fragment = "", ""
	return &httpSource{base: u.String(), token: token, client: &http.Client{Timeout: 30 * time.Second}}, nil
}

func (s *httpSource) close() error { return nil }

// call sends a request to the admin API and decodes a 2xx JSON answer into
// out. An error envelope becomes an error carrying its message; 404 on a run
// becomes errNoRun, on a row errNoRow.
func (s *httpSource) call(ctx context.Context, method, path string, out any) error {
	return s.callBody(ctx, method, path, nil, out)
}

// callBody is call with in, when not nil, sent as the JSON body.
func (s *httpSource) callBody(ctx context.Context, method, path string, in, out any) error {
	var send io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		send = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.base+path, send)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("%w\n(is the app running there? an app serves its runs only where it mounts oke's admin.Handler: the demo at %s/; or give -data to open a data folder no app holds)", err, AdminPath)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("%s %s: read the answer: %w", method, s.base+path, err)
	}
	if resp.StatusCode/100 != 2 {
		var env struct {
			Error struct{ Code, Message string }
		}
		if json.Unmarshal(body, &env) != nil || env.Error.Code == "" {
			return fmt.Errorf("%s %s: %s (is the admin API mounted there?)", method, s.base+path, resp.Status)
		}
		if env.Error.Code == "NotFound" && strings.HasPrefix(path, "/runs/") {
			return fmt.Errorf("%w: %s", errNoRun, env.Error.Message)
		}
		if env.Error.Code == "NotFound" && strings.HasPrefix(path, "/idempotency/row") {
			return fmt.Errorf("%w: %s", errNoRow, env.Error.Message)
		}
		if env.Error.Code == "RowInProgress" {
			return fmt.Errorf("%w: %s", admin.ErrRowInProgress, env.Error.Message)
		}
		if resp.StatusCode == http.StatusUnauthorized {
			fix := "pass the app's admin token with -token or $OKE_ADMIN_TOKEN (the demo writes the one it draws at start to admin-token in its -data folder, or takes -admin-token-file)"
			if s.token != "" {
				fix = "the token given (-token or $OKE_ADMIN_TOKEN) is not the app's admin token"
			}
			return fmt.Errorf("%s: %s\n(%s)", env.Error.Code, env.Error.Message, fix)
		}
		return fmt.Errorf("%s: %s", env.Error.Code, env.Error.Message)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("%s %s: unexpected answer: %w", method, s.base+path, err)
	}
	return nil
}

func (s *httpSource) listRuns(ctx context.Context, f runFilter) ([]admin.RunView, bool, error) {
	q := url.Values{}
	for k, v := range map[string]string{"flow": f.flow, "status": f.status, "after": f.after, "before": f.before, "tenant": f.tenant} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if !f.createdAfter.IsZero() {
		q.Set("createdAfter", f.createdAfter.Format(time.RFC3339Nano))
	}
	if !f.createdBefore.IsZero() {
		q.Set("createdBefore", f.createdBefore.Format(time.RFC3339Nano))
	}
	if f.desc {
		q.Set("order", "desc")
	}
	// One more than asked, to know whether more follow; at the API's
	// largest page, its next cursor says so (a full page may be the last).
	ask := pageAsk(f.limit)
	q.Set("limit", strconv.Itoa(ask))
	var out admin.RunsPage
	if err := s.call(ctx, "GET", "/runs?"+q.Encode(), &out); err != nil {
		return nil, false, err
	}
	runs, more := trim(out.Runs, f.limit)
	return runs, more || (ask == f.limit && out.Next != ""), nil
}

// maxPage is the largest page the admin API serves.
const maxPage = 1000

// pageAsk is how many rows to ask for to show limit and know whether
// more follow: one more, within the API's largest page.
func pageAsk(limit int) int { return min(limit+1, maxPage) }

// trim cuts a listing asked with one more than limit back to limit, and
// says whether it had more.
func trim[T any](list []T, limit int) ([]T, bool) {
	if len(list) > limit {
		return list[:limit], true
	}
	return list, false
}

func (s *httpSource) getRun(ctx context.Context, id string) (admin.RunView, error) {
	var out admin.RunView
	err := s.call(ctx, "GET", "/runs/"+url.PathEscape(id), &out)
	return out, err
}

func (s *httpSource) replay(ctx context.Context, id string, from int) (string, error) {
	var out struct {
		ID string `json:"id"`
	}
	q := ""
	if from > 1 {
		q = "?fromStep=" + strconv.Itoa(from)
	}
	err := s.call(ctx, "POST", "/runs/"+url.PathEscape(id)+"/replay"+q, &out)
	return out.ID, err
}

func (s *httpSource) cancel(ctx context.Context, id string) (admin.RunView, error) {
	var out admin.RunView
	err := s.call(ctx, "POST", "/runs/"+url.PathEscape(id)+"/cancel", &out)
	return out, err
}

func (s *httpSource) resume(ctx context.Context, id string) (admin.RunView, error) {
	var out admin.RunView
	err := s.call(ctx, "POST", "/runs/"+url.PathEscape(id)+"/resume", &out)
	return out, err
}

func (s *httpSource) signal(ctx context.Context, id string, req admin.SignalRequest) error {
	var out struct{}
	return s.callBody(ctx, "POST", "/runs/"+url.PathEscape(id)+"/signal", req, &out)
}

func keyQuery(k driver.Key) url.Values {
	return url.Values{"tenant": {k.Tenant}, "principal": {k.Principal}, "flow": {k.Flow}, "key": {k.Key}}
}

func (s *httpSource) findRows(ctx context.Context, key driver.Key) ([]admin.RowView, error) {
	q := url.Values{"key": {key.Key}, "limit": {"100"}}
	for k, v := range map[string]string{"tenant": key.Tenant, "principal": key.Principal, "flow": key.Flow} {
		if v != "" {
			q.Set(k, v)
		}
	}
	var out struct {
		Rows []admin.RowView `json:"rows"`
	}
	err := s.call(ctx, "GET", "/idempotency?"+q.Encode(), &out)
	return out.Rows, err
}

func (s *httpSource) getRow(ctx context.Context, key driver.Key, reveal bool) (admin.RowView, error) {
	q := keyQuery(key)
	if reveal {
		q.Set("reveal", "1")
	}
	var out struct {
		Row admin.RowView `json:"row"`
	}
	err := s.call(ctx, "GET", "/idempotency/row?"+q.Encode(), &out)
	return out.Row, err
}

func (s *httpSource) deleteRow(ctx context.Context, key driver.Key, force bool) error {
	var out struct{}
	q := keyQuery(key)
	if force {
		q.Set("force", "1")
	}
	return s.call(ctx, "DELETE", "/idempotency/row?"+q.Encode(), &out)
}

func (s *httpSource) sweepBatch(ctx context.Context, n int) (int, error) {
	var out struct {
		Deleted int `json:"deleted"`
	}
	err := s.call(ctx, "POST", "/idempotency/sweep?batch="+strconv.Itoa(n)+"&limit="+strconv.Itoa(n), &out)
	return out.Deleted, err
}

func (s *httpSource) listRows(ctx context.Context, after driver.Key, limit int) ([]admin.RowView, bool, error) {
	ask := pageAsk(limit)
	q := url.Values{"limit": {strconv.Itoa(ask)}}
	if after != (driver.Key{}) {
		q.Set("afterTenant", after.Tenant)
		q.Set("afterPrincipal", after.Principal)
		q.Set("afterFlow", after.Flow)
		q.Set("afterKey", after.Key)
	}
	var out admin.RowsPage
	if err := s.call(ctx, "GET", "/idempotency?"+q.Encode(), &out); err != nil {
		return nil, false, err
	}
	rows, more := trim(out.Rows, limit)
	return rows, more || (ask == limit && out.Next != nil), nil
}

// driverSource reads a store with its driver: a data folder with the file
// driver, a Postgres database with the Postgres driver. Its commands make
// the calls the app's admin API makes (oke.CancelRun, oke.ResumeRun,
// oke.SignalRun, admin.DeleteRow, the driver's Sweep).
type driverSource struct {
	where   string // for messages: "the data folder .oke"
	kind    string // "data" or "postgres"
	d       driver.Driver
	j       driver.Journal
	closeFn func() error
}

func openData(dir string, readOnly bool) (*driverSource, error) {
	var (
		d   *file.Driver
		err error
	)
	if readOnly {
		d, err = file.OpenReadOnly(dir)
	} else {
		if fi, serr := os.Stat(dir); serr != nil || !fi.IsDir() {
			return nil, fmt.Errorf("no data folder at %s (-data names the folder an app keeps its file driver in, e.g. .oke)", dir)
		}
		d, err = file.Open(dir)
	}
	if errors.Is(err, file.ErrNoData) {
		return nil, err
	}
	if errors.Is(err, file.ErrLocked) {
		return nil, fmt.Errorf("%w\nAn app holds the data folder %s (the file driver allows one process at a time). Ask the app instead, e.g. -addr %s", err, dir, DefaultAddr)
	}
	if err != nil {
		return nil, fmt.Errorf("open the data folder %s: %w", dir, err)
	}
	return &driverSource{where: "the data folder " + dir, kind: "data", d: d, j: d, closeFn: d.Close}, nil
}

func (s *driverSource) close() error { return s.closeFn() }

func (s *driverSource) listRuns(ctx context.Context, f runFilter) ([]admin.RunView, bool, error) {
	rf := driver.RunFilter{After: f.after, Before: f.before, Flow: f.flow, Tenant: f.tenant,
		CreatedAfter: f.createdAfter, CreatedBefore: f.createdBefore, Desc: f.desc}
	if f.status != "" {
		for _, p := range strings.Split(f.status, ",") {
			st, ok := parseStatus(strings.TrimSpace(p))
			if !ok {
				return nil, false, &usageError{fmt.Errorf("-status must be running, sleeping, completed, failed or dead, got %q", p)}
			}
			rf.Status = append(rf.Status, st)
		}
	}
	runs, err := s.j.ListRuns(ctx, rf, f.limit+1)
	if err != nil {
		return nil, false, err
	}
	runs, more := trim(runs, f.limit)
	out := make([]admin.RunView, len(runs))
	for i, r := range runs {
		out[i] = admin.ViewRun(r, nil)
	}
	return out, more, nil
}

func (s *driverSource) getRun(ctx context.Context, id string) (admin.RunView, error) {
	run, steps, err := s.j.GetRun(ctx, id)
	if errors.Is(err, driver.ErrNotFound) {
		return admin.RunView{}, fmt.Errorf("%w: no run has id %q in %s", errNoRun, id, s.where)
	}
	if err != nil {
		return admin.RunView{}, err
	}
	v := admin.ViewRun(run, steps)
	if sg, ok := s.j.(driver.Signaler); ok {
		list, err := sg.Signals(ctx, id)
		if err != nil {
			return admin.RunView{}, err
		}
		if len(list) > 0 {
			v.Signals = admin.ViewSignals(list)
		}
	}
	return v, nil
}

// replay creates the new run with oke.ReplayRun (App.ReplayFrom without an
// app): due now, executed by the scheduler of an app on the store (on a
// data folder, when an app next opens it).
func (s *driverSource) replay(ctx context.Context, id string, from int) (string, error) {
	nid, err := oke.ReplayRun(ctx, s.j, id, from)
	switch {
	case errors.Is(err, driver.ErrNotFound):
		return "", fmt.Errorf("%w: no run has id %q in %s", errNoRun, id, s.where)
	case errors.Is(err, oke.ErrBadStep):
		return "", &usageError{fmt.Errorf("-from-step %d: %w", from, err)}
	}
	return nid, err
}

func (s *driverSource) cancel(ctx context.Context, id string) (admin.RunView, error) {
	run, err := oke.CancelRun(ctx, s.j, id)
	if errors.Is(err, driver.ErrNotFound) {
		return admin.RunView{}, fmt.Errorf("%w: no run has id %q in %s", errNoRun, id, s.where)
	}
	if err != nil {
		return admin.RunView{}, err
	}
	return admin.ViewRun(run, nil), nil
}

func (s *driverSource) resume(ctx context.Context, id string) (admin.RunView, error) {
	run, err := oke.ResumeRun(ctx, s.j, id)
	if errors.Is(err, driver.ErrNotFound) {
		return admin.RunView{}, fmt.Errorf("%w: no run has id %q in %s", errNoRun, id, s.where)
	}
	if err != nil {
		return admin.RunView{}, err
	}
	return admin.ViewRun(run, nil), nil
}

func (s *driverSource) signal(ctx context.Context, id string, req admin.SignalRequest) error {
	var opts []oke.SignalOption
	if req.Key != "" {
		opts = append(opts, oke.SignalKey(req.Key))
	}
	err := oke.SignalRun(ctx, s.j, id, req.Name, req.Data, opts...)
	if errors.Is(err, oke.ErrSignalNoRun) {
		return fmt.Errorf("%w: no run has id %q in %s", errNoRun, id, s.where)
	}
	return err
}

func (s *driverSource) findRows(ctx context.Context, key driver.Key) ([]admin.RowView, error) {
	f, ok := s.d.(driver.RowFinder)
	if !ok {
		return nil, fmt.Errorf("the driver of %s cannot find a key's rows (driver.RowFinder)", s.where)
	}
	rows, err := f.FindRows(ctx, key, 100)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	out := make([]admin.RowView, len(rows))
	for i, r := range rows {
		out[i] = admin.ViewRowHidden(r, now)
	}
	return out, nil
}

func (s *driverSource) getRow(ctx context.Context, key driver.Key, reveal bool) (admin.RowView, error) {
	row, err := s.d.Get(ctx, key)
	if errors.Is(err, driver.ErrNotFound) {
		return admin.RowView{}, fmt.Errorf("%w in %s", errNoRow, s.where)
	}
	if err != nil {
		return admin.RowView{}, err
	}
	if reveal {
		return admin.ViewRow(row), nil
	}
	return admin.ViewRowHidden(row, time.Now()), nil
}

func (s *driverSource) deleteRow(ctx context.Context, key driver.Key, force bool) error {
	err := admin.DeleteRow(ctx, s.d, key, force, time.Now())
	if errors.Is(err, driver.ErrNotFound) {
		return fmt.Errorf("%w in %s", errNoRow, s.where)
	}
	return err
}

func (s *driverSource) sweepBatch(ctx context.Context, n int) (int, error) {
	return s.d.Sweep(ctx, n)
}

func (s *driverSource) listRows(ctx context.Context, after driver.Key, limit int) ([]admin.RowView, bool, error) {
	rows, err := s.d.List(ctx, after, limit+1)
	if err != nil {
		return nil, false, err
	}
	rows, more := trim(rows, limit)
	now := time.Now()
	out := make([]admin.RowView, len(rows))
	for i, r := range rows {
		out[i] = admin.ViewRowHidden(r, now)
	}
	return out, more, nil
}

func parseStatus(s string) (driver.RunStatus, bool) {
	for _, st := range []driver.RunStatus{driver.RunRunning, driver.RunSleeping, driver.RunCompleted, driver.RunFailed, driver.RunDead} {
		if st.String() == s {
			return st, true
		}
	}
	return 0, false
}
