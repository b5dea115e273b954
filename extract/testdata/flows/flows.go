// Package flows is the fixture of extract's tests: one flow per case of
// effect inference, each with the effects and why its test expects.
package flows

import (
	"context"
	"database/sql"
	"net/http"

	"github.com/okengine/oke"
)

// In is the input of most flows.
type In struct {
	ID    string `json:"id"`
	Count int    `json:"count,omitempty"`
}

// Out is the output of most flows.
type Out struct {
	OK bool `json:"ok"`
}

var db *sql.DB

// Helpers, three levels deep: levelOne passes fx on, levelTwo a Store,
// levelThree writes.
func levelOne(ctx context.Context, fx *oke.Fx) error {
	return levelTwo(ctx, fx.Store(db))
}

func levelTwo(ctx context.Context, st *oke.Store) error {
	return levelThree(ctx, st, "t")
}

func levelThree(ctx context.Context, st *oke.Store, name string) error {
	_, err := st.Exec(ctx, `INSERT INTO items (name) VALUES ($1)`, name)
	return err
}

// Deep writes through three levels of helpers.
var Deep = oke.NewFlow("fixture.deep", oke.Options{},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		if err := levelOne(ctx, fx); err != nil {
			return oke.Response[Out]{}, err
		}
		return oke.Created(Out{OK: true}, "/deep/"+in.ID), nil
	})

type notifier struct{ to string }

func (n *notifier) notify(ctx context.Context, fx *oke.Fx) error {
	return fx.Send(ctx, oke.Message{Channel: "email", To: n.to})
}

// MethodValue sends through a method value.
var MethodValue = oke.NewFlow("fixture.methodValue", oke.Options{},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		n := &notifier{to: in.ID}
		send := n.notify
		return oke.OK(Out{}), send(ctx, fx)
	})

// Closure emits from a function literal it calls.
var Closure = oke.NewFlow("fixture.closure", oke.Options{},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		emit := func(name string) error {
			return fx.Emit(ctx, name, in)
		}
		return oke.OK(Out{}), emit("closure.done")
	})

// Callee writes; Caller calls it in-process.
var Callee = oke.NewFlow("fixture.callee", oke.Options{},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		_, err := fx.Store(db).Exec(ctx, `UPDATE items SET n = n + 1 WHERE id = $1`, in.ID)
		return oke.OK(Out{OK: true}), err
	})

var Caller = oke.NewFlow("fixture.caller", oke.Options{},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		out, err := oke.Call(ctx, fx, Callee, in)
		return oke.OK(out), err
	})

// Stepped is durable: its fetch is in a step's body.
var Stepped = oke.NewFlow("fixture.stepped", oke.Options{Durable: true},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		id, err := oke.NewID(ctx, "draw id")
		if err != nil {
			return oke.Response[Out]{}, err
		}
		_, err = oke.Step(ctx, "call provider", func(ctx context.Context) (int, error) {
			req, err := http.NewRequestWithContext(ctx, "POST", "http://provider/"+id, nil)
			if err != nil {
				return 0, err
			}
			resp, err := fx.Fetch(req)
			if err != nil {
				return 0, err
			}
			resp.Body.Close()
			return resp.StatusCode, nil
		})
		return oke.OK(Out{}), err
	})

// ReadOnly is a POST that only reads: the header is not honored.
var ReadOnly = oke.NewFlow("fixture.readOnly", oke.Options{},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		var n int
		err := fx.Store(db).QueryRow(ctx, `SELECT count(*) FROM items WHERE id = $1`, in.ID).Scan(&n)
		return oke.OK(Out{OK: n > 0}), err
	})

// SecretsOnly is a POST that only reads a secret: not honored either.
var SecretsOnly = oke.NewFlow("fixture.secretsOnly", oke.Options{},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		s, err := fx.Secret(ctx, "API_KEY")
		return oke.OK(Out{OK: s != ""}), err
	})

// Export streams, writing as it goes: a stream never honors the header.
var Export = oke.NewStream("fixture.export", oke.Options{},
	func(ctx context.Context, in In, fx *oke.Fx, w http.ResponseWriter) error {
		if _, err := fx.Store(db).Exec(ctx, `INSERT INTO exports (id) VALUES ($1)`, in.ID); err != nil {
			return err
		}
		_, err := w.Write([]byte("line\n"))
		return err
	})

// Feed is a live feed: calling send is not an effect.
var Feed = oke.NewLive("fixture.feed", oke.Options{},
	func(ctx context.Context, in In, fx *oke.Fx, send func(oke.Event) error) error {
		return send(oke.Event{Name: "tick"})
	})

var order = "id"

// Dynamic sends SQL built at run time (a write), and a constant one (a read).
var Dynamic = oke.NewFlow("fixture.dynamic", oke.Options{},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		st := fx.Store(db)
		if _, err := st.Query(ctx, `SELECT id FROM items`); err != nil {
			return oke.Response[Out]{}, err
		}
		_, err := st.Query(ctx, `SELECT id FROM items ORDER BY `+order)
		return oke.OK(Out{}), err
	})

// Dialect picks one of two constant statements: both are classified.
var Dialect = oke.NewFlow("fixture.dialect", oke.Options{Effects: []oke.Effect{oke.EffectRead}},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		q := `SELECT id FROM items ORDER BY rowid`
		if in.Count > 0 {
			q = `SELECT id FROM items ORDER BY seq`
		}
		_, err := fx.Store(db).Query(ctx, q)
		return oke.OK(Out{}), err
	})

// readFlow builds a read-only flow: called twice, it makes two flows.
func readFlow(name string) *oke.Flow[In, Out] {
	return oke.NewFlow(name, oke.Options{Description: "Read an item."},
		func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
			_, err := fx.Store(db).Query(ctx, `SELECT * FROM items WHERE id = $1`, in.ID)
			return oke.OK(Out{}), err
		})
}

// Notifier is an interface: extract cannot see into its methods.
type Notifier interface {
	Notify(ctx context.Context, fx *oke.Fx) error
}

// Server holds flows built by methods.
type Server struct {
	n Notifier
}

// viaInterface passes fx to an interface method: a conservative write.
func (s *Server) viaInterface() *oke.Flow[In, Out] {
	return oke.NewFlow("fixture.viaInterface", oke.Options{},
		func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
			return oke.OK(Out{}), s.n.Notify(ctx, fx)
		})
}

// TxOnly writes only through the flow's transaction (and reads elsewhere).
var TxOnly = oke.NewFlow("fixture.txOnly", oke.Options{Idempotency: oke.Required},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		var n int
		if err := fx.Store(db).QueryRow(ctx, `SELECT 1`).Scan(&n); err != nil {
			return oke.Response[Out]{}, err
		}
		tx, err := fx.Tx(ctx)
		if err != nil {
			return oke.Response[Out]{}, err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO items (id) VALUES ($1)`, in.ID); err != nil {
			return oke.Response[Out]{}, err
		}
		return oke.Created(Out{OK: true}, "/items/"+in.ID), nil
	})

// Everything else fx does: raw, ask, embed, an HTTP client, Store.Tx, a
// run, a claim (not an effect) and a step name from the loop index.
var Misc = oke.NewFlow("fixture.misc", oke.Options{Durable: true, Idempotency: oke.Idempotency{TTL: "1h"}},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		if err := fx.Raw(ctx, "publish", func(context.Context) error { return nil }); err != nil {
			return oke.Response[Out]{}, err
		}
		if _, err := fx.Ask(ctx, oke.AskRequest{Prompt: in.ID}); err != nil {
			return oke.Response[Out]{}, err
		}
		if _, err := fx.Embed(ctx, []string{in.ID}); err != nil {
			return oke.Response[Out]{}, err
		}
		_ = fx.HTTPClient()
		err := fx.Store(db).Tx(ctx, nil, func(tx *oke.Tx) error {
			_, err := tx.Exec(ctx, `DELETE FROM items WHERE id = $1`, in.ID)
			return err
		})
		if err != nil {
			return oke.Response[Out]{}, err
		}
		if _, err := oke.Claim(ctx, "item:"+in.ID); err != nil {
			return oke.Response[Out]{}, err
		}
		for i := 0; i < in.Count; i++ {
			if _, err := oke.Step(ctx, stepName(i), func(ctx context.Context) (string, error) {
				return oke.Run(ctx, fx, Callee, in)
			}); err != nil {
				return oke.Response[Out]{}, err
			}
		}
		return oke.NoContent[Out](), nil
	})

func stepName(i int) string { return "run " + string(rune('a'+i)) }

// Bind binds the fixture's flows, some in a loop over constant values.
func Bind(app *oke.App, s *Server) {
	app.Handle(oke.POST("/deep"), Deep)
	app.Handle(oke.PUT("/method-value/{id}"), MethodValue)
	app.Handle(oke.PATCH("/closure"), Closure)
	app.Handle(oke.RPC(), Callee)
	app.Handle(oke.DELETE("/caller/{id}"), Caller)
	app.Handle(oke.POST("/stepped"), Stepped)
	app.Handle(oke.POST("/read-only"), ReadOnly)
	app.Handle(oke.QUERY("/secrets-only"), SecretsOnly)
	app.Handle(oke.POST("/export"), Export)
	app.Handle(oke.GET("/feed"), Feed)
	app.Handle(oke.POST("/dynamic"), Dynamic)
	app.Handle(oke.GET("/dialect"), Dialect)
	for _, p := range []string{"/items/{id}", "/things/{id}"} {
		app.Handle(oke.GET(p), readFlow("fixture.read"))
	}
	app.Handle(oke.GET("/other/{id}"), readFlow("fixture.readOther"))
	app.Handle(oke.POST("/via-interface"), s.viaInterface())
	app.Handle(oke.POST("/tx-only"), TxOnly)
	app.Handle(oke.OnEvent("item.changed"), Misc)
	app.Handle(oke.Webhook("/hooks/provider", "data.id").DedupeTTL("7d"), Callee)
	app.Handle(oke.Internal(), Caller)
}
