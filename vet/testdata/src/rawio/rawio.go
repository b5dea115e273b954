// Package rawio holds the cases of rule rawio: raw network, database,
// file and process calls outside a step, direct or through helpers.
package rawio

import (
	"context"
	"database/sql"
	"net/http"
	"os"
	"os/exec"

	"github.com/okengine/oke"
)

type In struct{ URL string }
type Out struct{}

// Repo owns its *sql.DB.
type Repo struct{ db *sql.DB }

func (r *Repo) Save(ctx context.Context, id string) error {
	_, err := r.db.ExecContext(ctx, `INSERT INTO t (id) VALUES ($1)`, id)
	return err
}

func (r *Repo) Count(ctx context.Context) (n int, err error) {
	err = r.db.QueryRowContext(ctx, `SELECT count(*) FROM t`).Scan(&n)
	return n, err
}

// notify posts through the default client.
func notify(url string) error {
	resp, err := http.Post(url, "text/plain", nil)
	if err == nil {
		resp.Body.Close()
	}
	return err
}

var (
	db   *sql.DB
	repo = &Repo{}
)

// purge is a func variable given only a *sql.DB.
var purge = func(db *sql.DB) error {
	_, err := db.Exec(`DELETE FROM t`)
	return err
}

var Bad = oke.NewFlow("rawio.bad", oke.Options{Durable: true},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		http.Get(in.URL) // want `^http.Get \(net/http\) outside a step in durable flow "rawio.bad": a raw call oke cannot see: it runs again on every pick-up, and its answer may differ; move it into oke.Step\(ctx, "name", …\), and send it through fx there \(fx.Store, fx.HTTPClient, fx.Raw\) so that oke knows what it does$`
		req, _ := http.NewRequest("GET", in.URL, nil)
		http.DefaultClient.Do(req)                    // want `^\(\*http.Client\).Do \(net/http\) outside a step`
		db.ExecContext(ctx, `UPDATE t SET n = n + 1`) // want `^\(\*sql.DB\).ExecContext \(database/sql\) outside a step`
		repo.Save(ctx, "x")                           // want `^call of rawio.Repo.Save outside a step in durable flow "rawio.bad" reaches \(\*sql.DB\).ExecContext \(database/sql\) at rawio.go:\d+ \(through rawio.Repo.Save\): a raw call oke cannot see`
		notify(in.URL)                                // want `^call of rawio.notify outside a step .* reaches http.Post \(net/http\)`
		os.WriteFile("/tmp/x", nil, 0o600)            // want `^os.WriteFile \(os\) outside a step`
		exec.Command("true").Run()                    // want `^\(\*exec.Cmd\).Run \(os/exec\) outside a step`
		purge(db)                                     // want `^function variable rawio.purge outside a step in durable flow "rawio.bad" reaches \(\*sql.DB\).Exec \(database/sql\) at rawio.go:\d+ \(through rawio.purge\)`
		save := func() { db.Exec(`DELETE FROM t`) }   // want `^\(\*sql.DB\).Exec \(database/sql\) outside a step`
		save()
		return oke.OK(Out{}), nil
	})

var Good = oke.NewFlow("rawio.good", oke.Options{Durable: true},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		// Reads with a constant SELECT are not reported (as through fx.Store).
		var n int
		db.QueryRowContext(ctx, `SELECT count(*) FROM t`).Scan(&n)
		repo.Count(ctx)
		// The same calls in steps.
		oke.Step(ctx, "save", func(ctx context.Context) (bool, error) {
			http.Get(in.URL)
			os.WriteFile("/tmp/x", nil, 0o600)
			return true, repo.Save(ctx, "x")
		})
		oke.Step(ctx, "notify", func(ctx context.Context) (bool, error) { return true, notify(in.URL) })
		// Building a request or a command is not a call.
		_, _ = http.NewRequest("GET", in.URL, nil)
		_ = exec.Command("true")
		return oke.OK(Out{}), nil
	})
