package vet

import (
	"go/ast"
	"go/constant"
	"go/types"
	"strings"

	"github.com/okengine/oke"
)

// okePath is the import path of the oke package.
const okePath = "github.com/okengine/oke"

// A nondet is a source of values that differ from one pick-up of a run to
// the next: the clock, randomness, new UUIDs.
type nondet struct {
	what string // how messages name it: "time.Now", "rand.Intn (math/rand)"
	kind nondetKind
}

type nondetKind int

const (
	kindTime nondetKind = iota
	kindRand
	kindID
	kindMapOrder // the order of a range over a map (step names only)
)

// idPackages are the UUID (and similar id) packages whose generators draw
// a new id on every call, matched by import path: the analyzers do not
// import them. A name listed is a generator; for the packages with a nil
// list, every exported function whose name starts with "New" is one, except
// the name-based (deterministic) ones in deterministicIDs.
var idPackages = map[string][]string{
	"github.com/google/uuid":     nil,
	"github.com/gofrs/uuid":      {"NewV1", "NewV4", "NewV6", "NewV7"},
	"github.com/gofrs/uuid/v5":   {"NewV1", "NewV4", "NewV6", "NewV7"},
	"github.com/satori/go.uuid":  {"NewV1", "NewV2", "NewV4"},
	"github.com/rs/xid":          {"New", "NewWithTime"},
	"github.com/oklog/ulid":      {"Make", "Now"},
	"github.com/oklog/ulid/v2":   {"Make", "Now", "MustNewDefault"},
	"github.com/segmentio/ksuid": {"New", "NewRandom", "NewRandomWithTime"},
}

// deterministicIDs are constructors of the listed id packages that derive
// the id from their arguments (a namespace and a name) and so are fine.
var deterministicIDs = map[string]bool{"NewMD5": true, "NewSHA1": true, "NewHash": true}

// randConstructors are the functions of math/rand and math/rand/v2 that make
// a generator from a seed instead of drawing from the global one: what they
// give is as deterministic as their seed.
var randConstructors = map[string]bool{
	"New": true, "NewSource": true, "NewZipf": true, "NewPCG": true, "NewChaCha8": true, "Seed": true,
}

// nondetSource says whether obj (what an identifier refers to) is a source
// of nondeterministic values, and how to name it.
func nondetSource(obj types.Object) (nondet, bool) {
	if obj == nil || obj.Pkg() == nil {
		return nondet{}, false
	}
	path, name := obj.Pkg().Path(), obj.Name()
	fn, isFunc := obj.(*types.Func)
	if isFunc && fn.Signature().Recv() != nil {
		return nondet{}, false // methods (of a seeded *rand.Rand, of a time.Time) are as deterministic as their receiver
	}
	switch path {
	case "time":
		if isFunc && (name == "Now" || name == "Since" || name == "Until") {
			return nondet{"time." + name, kindTime}, true
		}
	case "math/rand", "math/rand/v2":
		if isFunc && !randConstructors[name] {
			return nondet{"rand." + name + " (" + path + ")", kindRand}, true
		}
	case "crypto/rand":
		if isFunc || name == "Reader" {
			return nondet{"rand." + name + " (crypto/rand)", kindRand}, true
		}
	}
	if names, ok := idPackages[path]; ok && isFunc && obj.Exported() {
		gen := false
		if names == nil {
			gen = strings.HasPrefix(name, "New") && !deterministicIDs[name]
		} else {
			for _, n := range names {
				gen = gen || n == name
			}
		}
		if gen {
			return nondet{obj.Pkg().Name() + "." + name + " (" + path + ")", kindID}, true
		}
	}
	return nondet{}, false
}

// An effect is a call that changes the world through fx.
type effect struct {
	what, why, fix string
}

const fixStep = `move it into oke.Step(ctx, "name", …)`

// fxEffects are the methods of *oke.Fx that are effects in a durable flow
// when called outside a step. Secret (a read), Store (a wrapper; its
// statements are judged one by one), Fail, Flow, Identity and Effects are
// not.
var fxEffects = map[string]effect{
	"Emit":       {"fx.Emit", "it emits the event again on every pick-up, and each emit starts new runs of the flows bound with oke.OnEvent", fixStep + ", where its runs start exactly once"},
	"Send":       {"fx.Send", "it sends the message again on every pick-up, without the step's idempotency key (oke.StepKey is empty outside a step)", fixStep},
	"Fetch":      {"fx.Fetch", "the request is sent again on every pick-up, without a stable Idempotency-Key (oke.StepKey is empty outside a step)", fixStep},
	"HTTPClient": {"fx.HTTPClient", "requests through the client are sent again on every pick-up", `get the client and send with it inside oke.Step(ctx, "name", …)`},
	"Ask":        {"fx.Ask", "the model is asked again on every pick-up: another cost, perhaps another answer", fixStep + ", so its answer is saved"},
	"Embed":      {"fx.Embed", "the embedding is computed again on every pick-up", fixStep + ", so its result is saved"},
	"Raw":        {"fx.Raw", "the effect runs again on every pick-up", fixStep},
	"Signal":     {"fx.Signal", "it sends the signal again on every pick-up (a new signal each time, unless oke.SignalKey dedupes it)", fixStep + ", where it is sent exactly once"},
	"Tx":         {"fx.Tx", "a durable flow's transaction belongs to a step, where its writes commit with the step's saved result; outside one fx.Tx fails", `open it inside oke.Step(ctx, "name", …)`},
}

// okeEffects are the package-level functions of oke that are effects.
var okeEffects = map[string]effect{
	"Run":  {"oke.Run", "it starts another run on every pick-up", fixStep + ", where it starts the run exactly once"},
	"Call": {"oke.Call", "the called flow runs again, with all its effects, on every pick-up", fixStep},
}

// storeEffect judges a statement sent through a *oke.Store or *oke.Tx
// (Exec, Query, QueryRow): a write is an effect, a read is not. The SQL is
// classified with oke.ClassifySQL, the classifier the app uses at run time;
// a statement that is not a constant string counts as a write, as it does
// for oke extract.
func storeEffect(info *types.Info, recv, method string, query ast.Expr) (effect, bool) {
	fix := fixStep + ", with INSERT … ON CONFLICT (or another upsert) so that a step cut off and run again adds nothing twice"
	tv, ok := info.Types[query]
	if !ok || tv.Value == nil || tv.Value.Kind() != constant.String {
		return effect{
			"a statement through *oke." + recv + "." + method + " that oke vet cannot read (not a constant string)",
			"it counts as a write, and a write outside a step runs again on every pick-up", fix}, true
	}
	q := constant.StringVal(tv.Value)
	if oke.ClassifySQL(q) == oke.EffectRead {
		return effect{}, false
	}
	return effect{"a write (" + firstWord(q) + ") through *oke." + recv + "." + method, "it runs again on every pick-up", fix}, true
}

// firstWord is the first SQL keyword of q, upper-cased: "INSERT".
func firstWord(q string) string {
	f := strings.FieldsFunc(q, func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') })
	if len(f) == 0 {
		return "SQL"
	}
	return strings.ToUpper(f[0])
}

// isOke reports whether t is *oke.name (or oke.name when ptr is false).
func isOke(t types.Type, name string) bool {
	if p, ok := types.Unalias(t).(*types.Pointer); ok {
		t = p.Elem()
	} else {
		return false
	}
	n, ok := types.Unalias(t).(*types.Named)
	return ok && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == okePath && n.Obj().Name() == name
}

// isFxHandle reports whether t is one of the handles a flow's effects go
// through: *oke.Fx, *oke.Store, *oke.Tx.
func isFxHandle(t types.Type) bool {
	return t != nil && (isOke(t, "Fx") || isOke(t, "Store") || isOke(t, "Tx"))
}

// isNamed reports whether t (or what it points to) is the named type
// path.name.
func isNamed(t types.Type, path, name string) bool {
	if t == nil {
		return false
	}
	if p, ok := types.Unalias(t).(*types.Pointer); ok {
		t = p.Elem()
	}
	n, ok := types.Unalias(t).(*types.Named)
	return ok && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == path && n.Obj().Name() == name
}

// isGroup reports whether t is a sync.WaitGroup or an errgroup.Group
// (golang.org/x/sync/errgroup, matched by path), or a pointer to one.
func isGroup(t types.Type) bool {
	return isNamed(t, "sync", "WaitGroup") || isNamed(t, "golang.org/x/sync/errgroup", "Group")
}

// okeFunc reports whether fn is the package-level function oke.name.
func okeFunc(fn *types.Func, name string) bool {
	return fn != nil && fn.Pkg() != nil && fn.Pkg().Path() == okePath && fn.Name() == name && fn.Signature().Recv() == nil
}

// okeMethod returns the receiver type name (Fx, Store, Tx) and reports
// whether fn is a method of an oke type.
func okeMethod(fn *types.Func) (string, bool) {
	if fn == nil || fn.Pkg() == nil || fn.Pkg().Path() != okePath {
		return "", false
	}
	recv := fn.Signature().Recv()
	if recv == nil {
		return "", false
	}
	t := recv.Type()
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	if n, ok := types.Unalias(t).(*types.Named); ok {
		return n.Obj().Name(), true
	}
	return "", false
}
