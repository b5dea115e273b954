// Package hidden is the fail-safe corpus of extract's tests: flows that
// change the world without going through fx (each must come out with the
// effect raw, honoring Idempotency-Key, with a why and a warning), and flows
// that only read (each must come out not honoring the header). The test
// also runs every flow through a real App and sends one key twice.
//
// Each hidden-effect flow's effect is real: a request to Provider, a row in
// DB, a file in Dir. The test sets them.
package hidden

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	_ "unsafe" // go:linkname

	"github.com/jackc/pgx/v5"

	"github.com/okengine/oke"
)

// In is every flow's input: ID names the effect (a row, a file).
type In struct {
	ID string `json:"id"`
}

// Out is every flow's output.
type Out struct {
	OK bool `json:"ok"`
}

// The world the effects change; the test sets these.
var (
	Provider string  // base URL of a server that counts requests
	DB       *sql.DB // a database with a table notes(id TEXT)
	Dir      string  // a directory the file flows write into
)

func ok() (oke.Response[Out], error) { return oke.Created(Out{OK: true}, ""), nil }

func fail(err error) (oke.Response[Out], error) { return oke.Response[Out]{}, err }

// --- net/http clients -------------------------------------------------------

// DefaultClient posts with http.DefaultClient.Do.
var DefaultClient = oke.NewFlow("hidden.defaultClient", oke.Options{},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, Provider+"/charge", strings.NewReader(in.ID))
		if err != nil {
			return fail(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return fail(err)
		}
		resp.Body.Close()
		return ok()
	})

// Post uses the package function http.Post.
var Post = oke.NewFlow("hidden.post", oke.Options{},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		resp, err := http.Post(Provider+"/charge", "text/plain", strings.NewReader(in.ID))
		if err != nil {
			return fail(err)
		}
		resp.Body.Close()
		return ok()
	})

// sdk is a provider's SDK that owns its own *http.Client.
type sdk struct {
	base   string
	client *http.Client
}

func newSDK() *sdk { return &sdk{base: Provider, client: &http.Client{}} }

func (s *sdk) charge(ctx context.Context, id string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.base+"/charge", strings.NewReader(id))
	if err != nil {
		return err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// SDK calls a helper type that owns its client, two calls down.
var SDK = oke.NewFlow("hidden.sdk", oke.Options{},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		if err := newSDK().charge(ctx, in.ID); err != nil {
			return fail(err)
		}
		return ok()
	})

// MethodValue posts through a method value of the SDK.
var MethodValue = oke.NewFlow("hidden.methodValue", oke.Options{},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		charge := newSDK().charge
		if err := charge(ctx, in.ID); err != nil {
			return fail(err)
		}
		return ok()
	})

// Goroutine posts from a goroutine it waits for.
var Goroutine = oke.NewFlow("hidden.goroutine", oke.Options{},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		var wg sync.WaitGroup
		var err error
		wg.Add(1)
		go func() {
			defer wg.Done()
			var resp *http.Response
			resp, err = http.Post(Provider+"/charge", "text/plain", strings.NewReader(in.ID))
			if err == nil {
				resp.Body.Close()
			}
		}()
		wg.Wait()
		if err != nil {
			return fail(err)
		}
		return ok()
	})

// --- database/sql outside fx ------------------------------------------------

// SQLExec writes with (*sql.DB).ExecContext on a handle fx never saw.
var SQLExec = oke.NewFlow("hidden.sqlExec", oke.Options{},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		if _, err := DB.ExecContext(ctx, `INSERT INTO notes (id) VALUES (?)`, in.ID); err != nil {
			return fail(err)
		}
		return ok()
	})

// repo is a repository that owns its *sql.DB.
type repo struct{ db *sql.DB }

func (r *repo) save(ctx context.Context, id string) error {
	_, err := r.db.ExecContext(ctx, `INSERT INTO notes (id) VALUES (?)`, id)
	return err
}

var notes = &repo{}

// Repo writes through a repository struct.
var Repo = oke.NewFlow("hidden.repo", oke.Options{},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		notes.db = DB
		if err := notes.save(ctx, in.ID); err != nil {
			return fail(err)
		}
		return ok()
	})

// Saver is a function variable given only a *sql.DB; Init sets it.
var Saver func(ctx context.Context, db *sql.DB, id string) error

func saveNote(ctx context.Context, db *sql.DB, id string) error {
	_, err := db.ExecContext(ctx, `INSERT INTO notes (id) VALUES (?)`, id)
	return err
}

// Init wires the function variable, as an app's main would.
func Init() { Saver = saveNote }

// FuncVar writes through the function variable.
var FuncVar = oke.NewFlow("hidden.funcVar", oke.Options{},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		if err := Saver(ctx, DB, in.ID); err != nil {
			return fail(err)
		}
		return ok()
	})

// RuntimeSQL runs a statement whose SQL is built at run time through a raw
// handle: it cannot be proven a read.
var RuntimeSQL = oke.NewFlow("hidden.runtimeSQL", oke.Options{},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		q := "INSERT INTO notes (id) VALUES ('" + strings.ReplaceAll(in.ID, "'", "''") + "')"
		if _, err := DB.ExecContext(ctx, q); err != nil {
			return fail(err)
		}
		return ok()
	})

// --- files and processes ----------------------------------------------------

// WriteFile writes a file with os.WriteFile.
var WriteFile = oke.NewFlow("hidden.writeFile", oke.Options{},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		if err := os.WriteFile(uniqueFile(in.ID), []byte(in.ID), 0o644); err != nil {
			return fail(err)
		}
		return ok()
	})

var seq struct {
	sync.Mutex
	n int
}

// uniqueFile names a new file for each execution, so the test counts them.
func uniqueFile(id string) string {
	seq.Lock()
	defer seq.Unlock()
	seq.n++
	return filepath.Join(Dir, id+"."+strconv.Itoa(seq.n))
}

// Generic writes through a generic helper.
var Generic = oke.NewFlow("hidden.generic", oke.Options{},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		if err := store(uniqueFile(in.ID), in); err != nil {
			return fail(err)
		}
		return ok()
	})

func store[T any](name string, v T) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	defer f.Close()
	return json.NewEncoder(f).Encode(v)
}

// Command runs a process that leaves a file.
var Command = oke.NewFlow("hidden.command", oke.Options{},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		if err := exec.CommandContext(ctx, "touch", uniqueFile(in.ID)).Run(); err != nil {
			return fail(err)
		}
		return ok()
	})

// --- interfaces, reflection, raw sockets ------------------------------------

// Notifier is an interface the flow calls without fx.
type Notifier interface {
	Notify(ctx context.Context, msg string) error
}

// webhookNotifier is its implementation: it posts to the provider.
type webhookNotifier struct{ url string }

func (n webhookNotifier) Notify(ctx context.Context, msg string) error {
	resp, err := http.Post(n.url+"/notify", "text/plain", strings.NewReader(msg))
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// Service holds its Notifier in a field.
type Service struct{ Notifier Notifier }

// Svc is the flows' service; the test wires it.
var Svc = &Service{}

// Wire sets the service's notifier, as an app's main would.
func Wire() { Svc.Notifier = webhookNotifier{url: Provider} }

// Interface notifies through the interface field.
var Interface = oke.NewFlow("hidden.interface", oke.Options{},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		if err := Svc.Notifier.Notify(ctx, in.ID); err != nil {
			return fail(err)
		}
		return ok()
	})

// Publisher is an interface whose implementation is given from outside the
// flow's package (here: by the test): extract cannot know it.
type Publisher interface {
	Publish(topic string, data []byte) error
}

// Pub is set by the app (the test).
var Pub Publisher

// Publish publishes through the interface variable.
var Publish = oke.NewFlow("hidden.publish", oke.Options{},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		if err := Pub.Publish("notes", []byte(in.ID)); err != nil {
			return fail(err)
		}
		return ok()
	})

// Reflect calls a function through reflection.
var Reflect = oke.NewFlow("hidden.reflect", oke.Options{},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		out := reflect.ValueOf(post).Call([]reflect.Value{reflect.ValueOf(in.ID)})
		if err, _ := out[0].Interface().(error); err != nil {
			return fail(err)
		}
		return ok()
	})

func post(id string) error {
	resp, err := http.Post(Provider+"/charge", "text/plain", strings.NewReader(id))
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// Socket writes a request on a raw TCP connection.
var Socket = oke.NewFlow("hidden.socket", oke.Options{},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		host := strings.TrimPrefix(Provider, "http://")
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", host)
		if err != nil {
			return fail(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "POST /charge HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", host, len(in.ID), in.ID)
		_, err = io.Copy(io.Discard, conn)
		if err != nil {
			return fail(err)
		}
		return ok()
	})

// ThirdParty connects with a client of another module: extract reads the
// module's code (a few levels deep) and finds it dials. (The run-once test
// does not run it: it needs a server.)
var ThirdParty = oke.NewFlow("hidden.thirdParty", oke.Options{},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		conn, err := pgx.Connect(ctx, "postgres://127.0.0.1/"+in.ID)
		if err != nil {
			return fail(err)
		}
		defer conn.Close(ctx)
		return ok()
	})

// --- conservative: harmless, but not provably so -------------------------

// RuntimeSelect reads with a SELECT built at run time: extract classifies
// only constant SQL, so it counts as a write.
var RuntimeSelect = oke.NewFlow("hidden.runtimeSelect", oke.Options{},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		var n int
		q := "SELECT count(*) FROM " + strings.TrimSpace("notes")
		if err := fx.Store(DB).QueryRow(ctx, q).Scan(&n); err != nil {
			return fail(err)
		}
		return oke.OK(Out{OK: n > 0}), nil
	})

// ThirdPartyPure calls a pure function of another module: extract reads
// it and finds it pure.
var ThirdPartyPure = oke.NewFlow("hidden.thirdPartyPure", oke.Options{},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		return oke.OK(Out{OK: pgx.Identifier{"notes", in.ID}.Sanitize() != ""}), nil
	})

// nanotime has no Go body here: it is linked to the runtime's.
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

// Linkname calls a function with no Go body: extract cannot see what it
// does, so it counts as raw.
var Linkname = oke.NewFlow("hidden.linkname", oke.Options{},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		return oke.OK(Out{OK: nanotime() > 0}), nil
	})

// --- clean reads: not honored -----------------------------------------------

// ReadStore only reads through fx.Store.
var ReadStore = oke.NewFlow("hidden.readStore", oke.Options{},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		var n int
		if err := fx.Store(DB).QueryRow(ctx, `SELECT count(*) FROM notes WHERE id = ?`, in.ID).Scan(&n); err != nil {
			return fail(err)
		}
		return oke.OK(Out{OK: n > 0}), nil
	})

// ReadRaw reads with a constant SELECT on a raw handle: a read is not an
// effect, wherever it goes.
var ReadRaw = oke.NewFlow("hidden.readRaw", oke.Options{},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		var n int
		if err := DB.QueryRowContext(ctx, `SELECT count(*) FROM notes WHERE id = ?`, in.ID).Scan(&n); err != nil {
			return fail(err)
		}
		return oke.OK(Out{OK: n > 0}), nil
	})

// Pure computes: strings, JSON into a buffer, a log line, errors and
// Stringers, an interface whose every implementation is pure.
var Pure = oke.NewFlow("hidden.pure", oke.Options{},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		var buf bytes.Buffer
		if err := json.NewEncoder(&buf).Encode(in); err != nil {
			return fail(err)
		}
		slog.InfoContext(ctx, "pure", "id", in.ID, "size", buf.Len())
		var s fmt.Stringer = label(in.ID)
		msg := fmt.Sprintf("%s:%d", strings.ToUpper(s.String()), len(buf.String()))
		var sh Shaper = upper{}
		if sh.Shape(msg) == "" {
			return fail(fmt.Errorf("empty %w", io.EOF))
		}
		return oke.OK(Out{OK: true}), nil
	})

type label string

func (l label) String() string { return "label " + string(l) }

// Shaper has only pure implementations in the program.
type Shaper interface{ Shape(string) string }

type upper struct{}

func (upper) Shape(s string) string { return strings.ToUpper(s) }

// Bind binds every flow of the corpus at POST /NAME.
func Bind(app *oke.App) {
	app.Handle(oke.POST("/defaultClient"), DefaultClient)
	app.Handle(oke.POST("/post"), Post)
	app.Handle(oke.POST("/sdk"), SDK)
	app.Handle(oke.POST("/methodValue"), MethodValue)
	app.Handle(oke.POST("/goroutine"), Goroutine)
	app.Handle(oke.POST("/sqlExec"), SQLExec)
	app.Handle(oke.POST("/repo"), Repo)
	app.Handle(oke.POST("/funcVar"), FuncVar)
	app.Handle(oke.POST("/runtimeSQL"), RuntimeSQL)
	app.Handle(oke.POST("/writeFile"), WriteFile)
	app.Handle(oke.POST("/generic"), Generic)
	app.Handle(oke.POST("/command"), Command)
	app.Handle(oke.POST("/interface"), Interface)
	app.Handle(oke.POST("/publish"), Publish)
	app.Handle(oke.POST("/reflect"), Reflect)
	app.Handle(oke.POST("/socket"), Socket)
	app.Handle(oke.POST("/thirdParty"), ThirdParty)
	app.Handle(oke.POST("/runtimeSelect"), RuntimeSelect)
	app.Handle(oke.POST("/thirdPartyPure"), ThirdPartyPure)
	app.Handle(oke.POST("/linkname"), Linkname)
	app.Handle(oke.POST("/readStore"), ReadStore)
	app.Handle(oke.POST("/readRaw"), ReadRaw)
	app.Handle(oke.POST("/pure"), Pure)
}
