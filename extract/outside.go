package extract

import (
	"fmt"
	"go/token"
	"go/types"
	"sort"
	"strings"

	"golang.org/x/tools/go/ssa"

	"github.com/okengine/oke"
)

// This file is the fail-safe half of effect inference: effects a flow has
// without going through fx. The rule is spec 004's asymmetry — honoring the
// Idempotency-Key on a flow that only reads costs one stored row, ignoring it
// on a flow that writes charges a card twice — so the header may be ignored
// only when extract proves a flow has no non-read effect. Every call reachable
// from a flow's function is one of:
//
//   - known pure: a function of the standard library that does no I/O
//     (strings, strconv, encoding/json, time, fmt.Sprintf, log and slog, …),
//     or code of the main module that calls only such functions;
//   - an effect through fx: the oke API (api.go), with its precise kind;
//   - an effect outside fx, which counts as raw (spec 004's fx.raw): a call
//     into the standard library's I/O (the table below), found in the main
//     module's code or in another module's code that a flow calls (Run
//     loads the program again with those packages' bodies, up to
//     maxDeepRounds loads; a call into code still unread then), a call it
//     cannot resolve (an interface method with an implementation it
//     cannot see into, a function value from elsewhere, reflection, a
//     function with no Go body: assembly or cgo).
//
// Each effect outside fx gets a why chain like every other effect and a
// warning (rule "effect-outside-fx") naming the call and the fix: route it
// through fx.Store, fx.HTTPClient, fx.Send, … so that oke knows what it is,
// or wrap it in fx.Raw.

// RuleOutsideFx is the rule of a warning about an effect outside fx: a call
// that changes the world without going through fx. The flow counts it as raw
// (it honors Idempotency-Key); extract still exits 0.
const RuleOutsideFx = "effect-outside-fx"

// stdKind is what a function of the standard library does.
type stdKind uint8

const (
	stdPure   stdKind = iota
	stdIO             // I/O that changes something: raw
	stdSQL            // a database/sql statement: the kind of its SQL
	stdWriter         // pure itself, but writes to the io.Writer it is given
)

// stdFunc is an entry of the standard library's I/O table: a function
// ("os.WriteFile") or method ("(*net/http.Client).Do"), or a whole package
// ("syscall.*"), with the fix to suggest.
type stdFunc struct {
	kind stdKind
	arg  int    // stdSQL: the index of the SQL argument (receiver is 0)
	fix  string // what to use instead
}

const (
	fixHTTP  = "send it through fx.HTTPClient() or fx.Fetch so oke records the fetch"
	fixSQL   = "run the statement through fx.Store(db) or fx.Tx so oke classifies it"
	fixFile  = "wrap the file change in fx.Raw(ctx, \"what\", fn) so oke records it"
	fixExec  = "wrap the command in fx.Raw(ctx, \"what\", fn) so oke records it"
	fixNet   = "use fx.HTTPClient(), fx.Send or fx.Emit, or wrap the call in fx.Raw(ctx, \"what\", fn)"
	fixMail  = "send it with fx.Send so oke records it"
	fixOther = "wrap it in fx.Raw(ctx, \"what\", fn) so oke records it"
)

// stdIOTable is the standard library's I/O, by the name stdName gives a
// function: "pkg.Func", "(*pkg.T).M", "(pkg.T).M", or "pkg.*" for every
// function and method of a package. A function of the standard library not
// in the table is pure, except that one taking an io.Writer writes to it
// (stdWriterParam).
var stdIOTable = map[string]stdFunc{
	// net/http clients.
	"net/http.Get":                                {kind: stdIO, fix: fixHTTP},
	"net/http.Head":                               {kind: stdIO, fix: fixHTTP},
	"net/http.Post":                               {kind: stdIO, fix: fixHTTP},
	"net/http.PostForm":                           {kind: stdIO, fix: fixHTTP},
	"(*net/http.Client).Do":                       {kind: stdIO, fix: fixHTTP},
	"(*net/http.Client).Get":                      {kind: stdIO, fix: fixHTTP},
	"(*net/http.Client).Head":                     {kind: stdIO, fix: fixHTTP},
	"(*net/http.Client).Post":                     {kind: stdIO, fix: fixHTTP},
	"(*net/http.Client).PostForm":                 {kind: stdIO, fix: fixHTTP},
	"(*net/http.Transport).RoundTrip":             {kind: stdIO, fix: fixHTTP},
	"net/http.ListenAndServe":                     {kind: stdIO, fix: fixOther},
	"net/http.ListenAndServeTLS":                  {kind: stdIO, fix: fixOther},
	"net/http.Serve":                              {kind: stdIO, fix: fixOther},
	"net/http.ServeTLS":                           {kind: stdIO, fix: fixOther},
	"(*net/http.Server).ListenAndServe":           {kind: stdIO, fix: fixOther},
	"(*net/http.Server).ListenAndServeTLS":        {kind: stdIO, fix: fixOther},
	"(*net/http.Server).Serve":                    {kind: stdIO, fix: fixOther},
	"(*net/http.Server).ServeTLS":                 {kind: stdIO, fix: fixOther},
	"(*net/http.Server).Shutdown":                 {kind: stdIO, fix: fixOther},
	"(*net/http.Server).Close":                    {kind: stdIO, fix: fixOther},
	"(*net/http/httputil.ReverseProxy).ServeHTTP": {kind: stdIO, fix: fixHTTP},

	// Other network clients: every function and method of these packages.
	"net/smtp.*":                          {kind: stdIO, fix: fixMail},
	"net/rpc.*":                           {kind: stdIO, fix: fixNet},
	"net/rpc/jsonrpc.*":                   {kind: stdIO, fix: fixNet},
	"log/syslog.*":                        {kind: stdIO, fix: fixOther},
	"crypto/tls.Dial":                     {kind: stdIO, fix: fixNet},
	"crypto/tls.DialWithDialer":           {kind: stdIO, fix: fixNet},
	"(*crypto/tls.Dialer).Dial":           {kind: stdIO, fix: fixNet},
	"(*crypto/tls.Dialer).DialContext":    {kind: stdIO, fix: fixNet},
	"(*crypto/tls.Conn).Write":            {kind: stdIO, fix: fixNet},
	"(*crypto/tls.Conn).Handshake":        {kind: stdIO, fix: fixNet},
	"(*crypto/tls.Conn).HandshakeContext": {kind: stdIO, fix: fixNet},

	// database/sql: statements by the kind of their SQL; a prepared
	// statement's SQL is not seen where it runs.
	"(*database/sql.DB).Exec":              {kind: stdSQL, arg: 1, fix: fixSQL},
	"(*database/sql.DB).ExecContext":       {kind: stdSQL, arg: 2, fix: fixSQL},
	"(*database/sql.DB).Query":             {kind: stdSQL, arg: 1, fix: fixSQL},
	"(*database/sql.DB).QueryContext":      {kind: stdSQL, arg: 2, fix: fixSQL},
	"(*database/sql.DB).QueryRow":          {kind: stdSQL, arg: 1, fix: fixSQL},
	"(*database/sql.DB).QueryRowContext":   {kind: stdSQL, arg: 2, fix: fixSQL},
	"(*database/sql.Tx).Exec":              {kind: stdSQL, arg: 1, fix: fixSQL},
	"(*database/sql.Tx).ExecContext":       {kind: stdSQL, arg: 2, fix: fixSQL},
	"(*database/sql.Tx).Query":             {kind: stdSQL, arg: 1, fix: fixSQL},
	"(*database/sql.Tx).QueryContext":      {kind: stdSQL, arg: 2, fix: fixSQL},
	"(*database/sql.Tx).QueryRow":          {kind: stdSQL, arg: 1, fix: fixSQL},
	"(*database/sql.Tx).QueryRowContext":   {kind: stdSQL, arg: 2, fix: fixSQL},
	"(*database/sql.Conn).ExecContext":     {kind: stdSQL, arg: 2, fix: fixSQL},
	"(*database/sql.Conn).QueryContext":    {kind: stdSQL, arg: 2, fix: fixSQL},
	"(*database/sql.Conn).QueryRowContext": {kind: stdSQL, arg: 2, fix: fixSQL},
	"(*database/sql.Conn).Raw":             {kind: stdIO, fix: fixSQL},
	"(*database/sql.Stmt).Exec":            {kind: stdIO, fix: fixSQL},
	"(*database/sql.Stmt).ExecContext":     {kind: stdIO, fix: fixSQL},
	"(*database/sql.Stmt).Query":           {kind: stdIO, fix: fixSQL},
	"(*database/sql.Stmt).QueryContext":    {kind: stdIO, fix: fixSQL},
	"(*database/sql.Stmt).QueryRow":        {kind: stdIO, fix: fixSQL},
	"(*database/sql.Stmt).QueryRowContext": {kind: stdIO, fix: fixSQL},

	// Files.
	"os.WriteFile":           {kind: stdIO, fix: fixFile},
	"os.Create":              {kind: stdIO, fix: fixFile},
	"os.CreateTemp":          {kind: stdIO, fix: fixFile},
	"os.OpenFile":            {kind: stdIO, fix: fixFile},
	"os.OpenRoot":            {kind: stdIO, fix: fixFile},
	"os.Mkdir":               {kind: stdIO, fix: fixFile},
	"os.MkdirAll":            {kind: stdIO, fix: fixFile},
	"os.MkdirTemp":           {kind: stdIO, fix: fixFile},
	"os.Remove":              {kind: stdIO, fix: fixFile},
	"os.RemoveAll":           {kind: stdIO, fix: fixFile},
	"os.Rename":              {kind: stdIO, fix: fixFile},
	"os.Link":                {kind: stdIO, fix: fixFile},
	"os.Symlink":             {kind: stdIO, fix: fixFile},
	"os.Chmod":               {kind: stdIO, fix: fixFile},
	"os.Chown":               {kind: stdIO, fix: fixFile},
	"os.Lchown":              {kind: stdIO, fix: fixFile},
	"os.Chtimes":             {kind: stdIO, fix: fixFile},
	"os.Truncate":            {kind: stdIO, fix: fixFile},
	"os.CopyFS":              {kind: stdIO, fix: fixFile},
	"os.Setenv":              {kind: stdIO, fix: fixOther},
	"os.Unsetenv":            {kind: stdIO, fix: fixOther},
	"os.Clearenv":            {kind: stdIO, fix: fixOther},
	"os.Chdir":               {kind: stdIO, fix: fixOther},
	"os.Exit":                {kind: stdIO, fix: fixOther},
	"os.StartProcess":        {kind: stdIO, fix: fixExec},
	"(*os.File).Write":       {kind: stdIO, fix: fixFile},
	"(*os.File).WriteAt":     {kind: stdIO, fix: fixFile},
	"(*os.File).WriteString": {kind: stdIO, fix: fixFile},
	"(*os.File).ReadFrom":    {kind: stdIO, fix: fixFile},
	"(*os.File).Truncate":    {kind: stdIO, fix: fixFile},
	"(*os.File).Chmod":       {kind: stdIO, fix: fixFile},
	"(*os.File).Chown":       {kind: stdIO, fix: fixFile},
	"(*os.File).Sync":        {kind: stdIO, fix: fixFile},
	"(*os.Root).Create":      {kind: stdIO, fix: fixFile},
	"(*os.Root).OpenFile":    {kind: stdIO, fix: fixFile},
	"(*os.Root).Mkdir":       {kind: stdIO, fix: fixFile},
	"(*os.Root).MkdirAll":    {kind: stdIO, fix: fixFile},
	"(*os.Root).Remove":      {kind: stdIO, fix: fixFile},
	"(*os.Root).RemoveAll":   {kind: stdIO, fix: fixFile},
	"(*os.Root).Rename":      {kind: stdIO, fix: fixFile},
	"(*os.Root).WriteFile":   {kind: stdIO, fix: fixFile},
	"(*os.Root).Chmod":       {kind: stdIO, fix: fixFile},
	"(*os.Root).Chown":       {kind: stdIO, fix: fixFile},
	"(*os.Root).Chtimes":     {kind: stdIO, fix: fixFile},
	"(*os.Root).Link":        {kind: stdIO, fix: fixFile},
	"(*os.Root).Symlink":     {kind: stdIO, fix: fixFile},
	"(*os.Process).Kill":     {kind: stdIO, fix: fixExec},
	"(*os.Process).Signal":   {kind: stdIO, fix: fixExec},
	"io/ioutil.WriteFile":    {kind: stdIO, fix: fixFile},
	"io/ioutil.TempFile":     {kind: stdIO, fix: fixFile},
	"io/ioutil.TempDir":      {kind: stdIO, fix: fixFile},

	// Processes, system calls, plugins, reflection.
	"(*os/exec.Cmd).Run":            {kind: stdIO, fix: fixExec},
	"(*os/exec.Cmd).Start":          {kind: stdIO, fix: fixExec},
	"(*os/exec.Cmd).Output":         {kind: stdIO, fix: fixExec},
	"(*os/exec.Cmd).CombinedOutput": {kind: stdIO, fix: fixExec},
	"syscall.*":                     {kind: stdIO, fix: fixOther},
	"plugin.Open":                   {kind: stdIO, fix: fixOther},
	"(reflect.Value).Call":          {kind: stdIO, fix: "call the function directly, so that extract can see what it does"},
	"(reflect.Value).CallSlice":     {kind: stdIO, fix: "call the function directly, so that extract can see what it does"},
}

// stdPureSyscall are the functions of syscall that only read.
var stdPureSyscall = map[string]bool{
	"Getenv": true, "Environ": true, "Getpid": true, "Getppid": true, "Getuid": true, "Geteuid": true,
	"Getgid": true, "Getegid": true, "Getpagesize": true, "Getwd": true, "Gettimeofday": true,
}

// netIO reports whether a function of package net changes something:
// dialing, listening and writing to a connection. Lookups, parsing and the
// address types are pure (a lookup only reads).
func netIO(name string) bool {
	fn := name
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		fn = name[i+1:]
	}
	return strings.HasPrefix(fn, "Dial") || strings.HasPrefix(fn, "Listen") ||
		strings.HasPrefix(fn, "Write") || fn == "ReadFrom" || fn == "FileConn" || fn == "FileListener"
}

// isStd reports whether a package path is of the standard library.
func isStd(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".") && path != "C"
}

// stdName is fn's name as stdIOTable spells it, and its package path.
func stdName(obj *types.Func) (name, pkg string) {
	if obj == nil || obj.Pkg() == nil {
		return "", ""
	}
	pkg = obj.Pkg().Path()
	sig, _ := obj.Type().(*types.Signature)
	if sig == nil || sig.Recv() == nil {
		return pkg + "." + obj.Name(), pkg
	}
	t := sig.Recv().Type()
	star := ""
	if p, ok := t.(*types.Pointer); ok {
		t, star = p.Elem(), "*"
	}
	n, ok := types.Unalias(t).(*types.Named)
	if !ok {
		return "", pkg // an interface method: resolved elsewhere
	}
	return "(" + star + pkg + "." + n.Obj().Name() + ")." + obj.Name(), pkg
}

// stdLookup classifies a function of the standard library.
func stdLookup(obj *types.Func) (stdFunc, string) {
	name, pkg := stdName(obj)
	if name == "" {
		return stdFunc{}, ""
	}
	if e, ok := stdIOTable[name]; ok {
		return e, name
	}
	if e, ok := stdIOTable[pkg+".*"]; ok {
		if pkg == "syscall" && stdPureSyscall[obj.Name()] {
			return stdFunc{}, name
		}
		return e, name
	}
	if pkg == "net" && netIO(name) {
		return stdFunc{kind: stdIO, fix: fixNet}, name
	}
	if writerParam(obj) >= 0 {
		return stdFunc{kind: stdWriter, fix: fixFile}, name
	}
	return stdFunc{}, name
}

// writerParam is the index (receiver counted as 0 for methods, as SSA
// counts arguments) of the first parameter of obj whose type is an
// interface with a Write method (io.Writer, io.WriteCloser, …), or -1.
// Such a function writes what it is given to that writer: fmt.Fprintf,
// io.Copy, json.NewEncoder, bufio.NewWriter.
func writerParam(obj *types.Func) int {
	sig, ok := obj.Type().(*types.Signature)
	if !ok {
		return -1
	}
	off := 0
	if sig.Recv() != nil {
		off = 1
	}
	for i := 0; i < sig.Params().Len(); i++ {
		if isWriterIface(sig.Params().At(i).Type()) {
			return i + off
		}
	}
	return -1
}

func isWriterIface(t types.Type) bool {
	it, ok := t.Underlying().(*types.Interface)
	if !ok || it.Empty() {
		return false
	}
	for i := 0; i < it.NumMethods(); i++ {
		if it.Method(i).Name() == "Write" {
			return true
		}
	}
	return false
}

// pureWriterTypes are writers that only fill memory (or the process's own
// log): writing to them is not an effect.
var pureWriterTypes = map[string]bool{
	"*bytes.Buffer": true, "*strings.Builder": true, "*bufio.Writer": true, "*text/tabwriter.Writer": true,
	"*compress/gzip.Writer": true, "*compress/zlib.Writer": true, "*compress/flate.Writer": true,
	"*mime/multipart.Writer": true, "*encoding/csv.Writer": true, "*io.PipeWriter": true,
	"hash.Hash": true, "hash.Hash32": true, "hash.Hash64": true, "io.Discard": true,
}

// pureWriter reports whether the writer v (an argument of an io.Writer
// parameter) only fills memory: a *bytes.Buffer, a *strings.Builder, a hash,
// io.Discard, os.Stdout or os.Stderr (the process's log, not an effect on
// the world), or a writer of the main module's own (whose Write extract
// reads where the value is converted to an interface). A writer wrapping
// another (bufio.NewWriter(w)) is judged where it is made.
func (f *frame) pureWriter(v ssa.Value) bool {
	if f.taintOf(v)&tOke != 0 {
		return true // the response of a stream
	}
	pure := true
	f.a.ix.origins(v, nil, func(o ssa.Value, _ *ctxt) {
		if !pure {
			return
		}
		switch x := o.(type) {
		case *ssa.Const:
			return // nil
		case *ssa.Global:
			// loaded below
			_ = x
		}
		if ld, ok := o.(*ssa.UnOp); ok && ld.Op == token.MUL {
			if g, ok := ld.X.(*ssa.Global); ok && g.Pkg != nil {
				switch g.Pkg.Pkg.Path() + "." + g.Name() {
				case "os.Stdout", "os.Stderr", "io.Discard":
					return
				}
			}
		}
		t := o.Type()
		if pureWriterTypes[types.TypeString(t, nil)] {
			return
		}
		if f.a.bodyType(t) {
			return
		}
		pure = false
	})
	return pure
}

// bodyType reports whether t (or *t) is a named type of the main module,
// whose methods extract reads.
func (a *analyzer) bodyType(t types.Type) bool {
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	n, ok := types.Unalias(t).(*types.Named)
	if !ok || n.Obj().Pkg() == nil {
		return false
	}
	if _, isIface := n.Underlying().(*types.Interface); isIface {
		return false
	}
	p := a.prog.pkgs[n.Obj().Pkg().Path()]
	return p != nil && p.body
}

// pureMethods are interface methods that do not change the world whatever
// implements them (by the contracts of their standard interfaces): an
// error's text, a value's string form, a context's deadline and values, a
// sort, a hash, a reader's read, a lock.
var pureMethods = map[string]bool{
	"error.Error": true, "fmt.Stringer.String": true, "fmt.GoStringer.GoString": true, "fmt.Formatter.Format": true,
	"context.Context.Deadline": true, "context.Context.Done": true, "context.Context.Err": true, "context.Context.Value": true,
	"sort.Interface.Len": true, "sort.Interface.Less": true, "sort.Interface.Swap": true,
	"container/heap.Interface.Push": true, "container/heap.Interface.Pop": true,
	"container/heap.Interface.Len": true, "container/heap.Interface.Less": true, "container/heap.Interface.Swap": true,
	"hash.Hash.Write": true, "hash.Hash.Sum": true, "hash.Hash.Reset": true, "hash.Hash.Size": true, "hash.Hash.BlockSize": true,
	"hash.Hash32.Sum32": true, "hash.Hash64.Sum64": true,
	"io.Reader.Read": true, "io.ReaderAt.ReadAt": true, "io.ByteReader.ReadByte": true, "io.RuneReader.ReadRune": true,
	"io.Seeker.Seek": true, "io.Closer.Close": true, "io.ReadCloser.Read": true, "io.ReadCloser.Close": true,
	"io.ReadSeeker.Read": true, "io.ReadSeeker.Seek": true,
	"sync.Locker.Lock": true, "sync.Locker.Unlock": true,
	"encoding.TextMarshaler.MarshalText": true, "encoding.BinaryMarshaler.MarshalBinary": true,
	"encoding/json.Marshaler.MarshalJSON": true, "database/sql/driver.Valuer.Value": true,
	"database/sql.Scanner.Scan": true, "database/sql.Result.LastInsertId": true, "database/sql.Result.RowsAffected": true, "net.Addr.String": true, "net.Addr.Network": true,
	"net.Error.Timeout": true, "net.Error.Temporary": true,
	"net/http.ResponseWriter.Header": true,
	"go/ast.Node.Pos":                true, "go/ast.Node.End": true,
	"reflect.Type.Name": true, "reflect.Type.String": true, "reflect.Type.Kind": true,
}

// pureAnonMethods are methods of interfaces written in place
// (interface{ Unwrap() error }) that are pure by convention.
var pureAnonMethods = map[string]bool{
	"Error": true, "String": true, "Unwrap": true, "Is": true, "As": true, "Timeout": true, "Temporary": true,
	"Len": true, "Less": true, "Swap": true, "Validate": true,
}

// pureMethod reports whether the interface method called by cc is pure by
// its interface's contract.
func pureMethod(cc *ssa.CallCommon) bool {
	t := cc.Value.Type()
	if n, ok := types.Unalias(t).(*types.Named); ok && n.Obj().Pkg() != nil {
		return pureMethods[n.Obj().Pkg().Path()+"."+n.Obj().Name()+"."+cc.Method.Name()]
	} else if ok && n.Obj().Pkg() == nil { // error
		return pureMethods[n.Obj().Name()+"."+cc.Method.Name()]
	}
	// An interface written in place; or an embedded standard interface
	// (the method's own interface names it).
	if owner := ifaceOwner(cc.Method); owner != "" {
		return pureMethods[owner+"."+cc.Method.Name()]
	}
	return pureAnonMethods[cc.Method.Name()]
}

// ifaceOwner names the named interface that declares m ("io.Reader"), or "".
func ifaceOwner(m *types.Func) string {
	sig, ok := m.Type().(*types.Signature)
	if !ok || sig.Recv() == nil {
		return ""
	}
	if n, ok := types.Unalias(sig.Recv().Type()).(*types.Named); ok {
		if n.Obj().Pkg() == nil {
			return n.Obj().Name()
		}
		return n.Obj().Pkg().Path() + "." + n.Obj().Name()
	}
	return ""
}

// impl is one implementation of an interface method.
type impl struct {
	t  types.Type
	fn *ssa.Function
}

// implementations returns every concrete type among the loaded packages'
// named types (T and *T) that implements iface, with its method name.
// Packages extract did not load at all cannot contribute a type; see
// docs/extract.md.
func (a *analyzer) implementations(iface *types.Interface, method string) []impl {
	key := types.TypeString(iface, nil) + "." + method
	if r, ok := a.impls[key]; ok {
		return r
	}
	if a.named == nil {
		a.collectNamed()
	}
	var out []impl
	for _, n := range a.named {
		for _, t := range []types.Type{n, types.NewPointer(n)} {
			if !types.Implements(t, iface) {
				continue
			}
			sel := a.prog.ssa.MethodSets.MethodSet(t).Lookup(nil, method)
			if sel == nil {
				// an unexported method of another package: lookup by object
				ms := a.prog.ssa.MethodSets.MethodSet(t)
				for i := 0; i < ms.Len(); i++ {
					if ms.At(i).Obj().Name() == method {
						sel = ms.At(i)
						break
					}
				}
			}
			if sel == nil {
				continue
			}
			out = append(out, impl{t: t, fn: a.prog.ssa.MethodValue(sel)})
			break // T's methods are *T's too
		}
	}
	a.impls[key] = out
	return out
}

// collectNamed gathers the named non-interface, non-generic types of every
// loaded package (package-level and, for the main module, local ones).
func (a *analyzer) collectNamed() {
	seen := map[*types.TypeName]bool{}
	add := func(obj types.Object) {
		tn, ok := obj.(*types.TypeName)
		if !ok || tn.IsAlias() || seen[tn] {
			return
		}
		seen[tn] = true
		n, ok := tn.Type().(*types.Named)
		if !ok || n.TypeParams().Len() > 0 {
			return
		}
		if _, isIface := n.Underlying().(*types.Interface); isIface {
			return
		}
		a.named = append(a.named, n)
	}
	paths := make([]string, 0, len(a.prog.pkgs))
	for path := range a.prog.pkgs {
		paths = append(paths, path)
	}
	sort.Strings(paths)
	for _, path := range paths {
		p := a.prog.pkgs[path]
		if p.types == nil {
			continue
		}
		sc := p.types.Scope()
		for _, name := range sc.Names() {
			add(sc.Lookup(name))
		}
		if p.body && p.info != nil {
			var locals []types.Object
			for _, obj := range p.info.Defs {
				if tn, ok := obj.(*types.TypeName); ok && tn.Parent() != sc {
					locals = append(locals, tn)
				}
			}
			sort.Slice(locals, func(i, j int) bool { return locals[i].Pos() < locals[j].Pos() })
			for _, obj := range locals {
				add(obj)
			}
		}
	}
}

// outsideFx records an effect outside fx at pos: raw, with a warning.
func (f *frame) outsideFx(pos token.Pos, what, fix string) {
	f.emit(occ{effect: oke.EffectRaw, outside: true, pos: pos, fix: fix, hops: []string{f.hop(pos, what)}})
}

// unread records a call of code extract did not read (another module's,
// past what it reads of them): raw, conservatively.
func (f *frame) unread(pos token.Pos, what, fix string) {
	f.emit(occ{effect: oke.EffectRaw, outside: true, unread: true, pos: pos, fix: fix, hops: []string{f.hop(pos, what)}})
}

// stdCall classifies a call of a standard-library function (no body) that
// receives no effect handle of the flow's.
func (f *frame) stdCall(cc *ssa.CallCommon, callee *ssa.Function, pos token.Pos) {
	obj, _ := callee.Object().(*types.Func)
	if obj == nil {
		return
	}
	e, name := stdLookup(obj)
	text := f.callText(cc)
	switch e.kind {
	case stdIO:
		if f.fromFxClient(cc, name) {
			return // a request through fx.HTTPClient(): a fetch, counted there
		}
		f.outsideFx(pos, fmt.Sprintf("%s (%s): outside fx", text, name), e.fix)
	case stdSQL:
		var q ssa.Value
		if e.arg < len(cc.Args) {
			q = cc.Args[e.arg]
		}
		sqls, ok := f.strings(q)
		if !ok {
			f.outsideFx(pos, fmt.Sprintf("%s (%s) with SQL computed at run time: outside fx", text, name), e.fix)
			return
		}
		for _, s := range sqls {
			if k := oke.ClassifySQL(s); k == oke.EffectRead {
				f.emit(occ{effect: oke.EffectRead, hops: []string{f.hop(pos, text+" "+sqlText(s))}})
			} else {
				f.outsideFx(pos, fmt.Sprintf("%s %s (%s): outside fx", text, sqlText(s), name), e.fix)
			}
		}
	case stdWriter:
		i := writerParam(obj)
		if i >= 0 && i < len(cc.Args) && !f.pureWriter(cc.Args[i]) {
			f.outsideFx(pos, fmt.Sprintf("%s (%s) writes to a writer extract cannot see: outside fx", text, name),
				"write to a buffer oke can see (*bytes.Buffer, *strings.Builder), or wrap the write in fx.Raw(ctx, \"what\", fn) so oke records it")
		}
	}
}

// fromFxClient reports whether cc is a request of net/http's Client whose
// receiver is the client fx.HTTPClient() returned.
func (f *frame) fromFxClient(cc *ssa.CallCommon, name string) bool {
	if !strings.HasPrefix(name, "(*net/http.Client).") || len(cc.Args) == 0 {
		return false
	}
	return f.taintOf(cc.Args[0])&tClient != 0
}

// invoke classifies a call of an interface method that receives no effect
// handle: pure by its interface's contract, else what its implementations
// do — the concrete values the receiver may hold where extract can trace
// them, else every implementation among the loaded types.
func (f *frame) invoke(in ssa.CallInstruction, cc *ssa.CallCommon, pos token.Pos) {
	if pureMethod(cc) || f.taintOf(cc.Value)&tOke != 0 {
		return
	}
	iface, _ := cc.Value.Type().Underlying().(*types.Interface)
	if iface == nil {
		return
	}
	text := f.callText(cc)
	method := cc.Method.Name()
	var targets []impl
	unresolved := false
	f.a.ix.origins(cc.Value, nil, func(v ssa.Value, _ *ctxt) {
		if unresolved {
			return
		}
		if c, ok := v.(*ssa.Const); ok && c.IsNil() {
			return
		}
		if callee := resultOf(v); callee != nil && inOke(callee) {
			return // a value of oke's own
		}
		t := v.Type()
		if types.IsInterface(t) {
			unresolved = true
			return
		}
		sel := f.a.prog.ssa.MethodSets.MethodSet(t).Lookup(cc.Method.Pkg(), method)
		if sel == nil {
			unresolved = true
			return
		}
		targets = append(targets, impl{t: t, fn: f.a.prog.ssa.MethodValue(sel)})
	})
	how := "its value"
	if unresolved || len(targets) == 0 {
		targets = f.a.implementations(iface, method)
		how = "an implementation"
		if len(targets) == 0 {
			f.outsideFx(pos, fmt.Sprintf("%s: the interface method %s.%s has no implementation extract can see: outside fx", text, typeName(cc.Value.Type()), method),
				"call a concrete type's method, or route the effect through fx (or fx.Raw) so oke records it")
			return
		}
	}
	seen := map[*ssa.Function]bool{}
	for _, tg := range targets {
		if tg.fn == nil || seen[tg.fn] {
			continue
		}
		seen[tg.fn] = true
		f.target(in, cc, tg.fn, pos, fmt.Sprintf("%s (%s %s)", text, how, typeName(tg.t)))
	}
}

// target classifies one function a call may reach (an implementation of an
// interface method, the function a function value holds), analyzed as if
// called from code extract does not see.
func (f *frame) target(in ssa.CallInstruction, cc *ssa.CallCommon, fn *ssa.Function, pos token.Pos, what string) {
	if inOke(fn) {
		return
	}
	pkg := ""
	if fn.Pkg != nil {
		pkg = fn.Pkg.Pkg.Path()
	} else if obj, ok := fn.Object().(*types.Func); ok && obj.Pkg() != nil {
		pkg = obj.Pkg().Path()
	}
	if len(fn.Blocks) > 0 {
		f.include(f.a.summarize(fn, f.a.topEnv(fn)), in, f.hop(pos, what))
		return
	}
	if isStd(pkg) {
		obj, _ := fn.Object().(*types.Func)
		if obj == nil {
			return
		}
		if e, name := stdLookup(obj); e.kind == stdIO || e.kind == stdSQL {
			f.outsideFx(pos, fmt.Sprintf("%s → %s: outside fx", what, name), e.fix)
		}
		return
	}
	f.a.prog.wantBodies(pkg)
	f.unread(pos, fmt.Sprintf("%s → %s, outside the main module (extract does not read its body): outside fx", what, funcName(fn)), fixOther)
}

// externalCall classifies a call of a function with no body that receives
// no effect handle: the standard library's by its table; a function of
// another module, or one with no Go body in the main module (assembly,
// linkname, cgo), is an effect outside fx.
func (f *frame) externalCall(cc *ssa.CallCommon, callee *ssa.Function, pos token.Pos) {
	pkg := ""
	if obj, ok := callee.Object().(*types.Func); ok && obj.Pkg() != nil {
		pkg = obj.Pkg().Path()
	} else if callee.Pkg != nil {
		pkg = callee.Pkg.Pkg.Path()
	}
	if p := f.a.prog.pkgs[pkg]; p != nil && p.body {
		f.outsideFx(pos, fmt.Sprintf("%s has no Go body (assembly, linkname or cgo): outside fx", funcName(callee)), fixOther)
		return
	}
	if pkg == "C" || strings.HasPrefix(callee.Name(), "_Cfunc_") {
		f.outsideFx(pos, fmt.Sprintf("%s is a cgo call: outside fx", f.callText(cc)), fixOther)
		return
	}
	if isStd(pkg) {
		f.stdCall(cc, callee, pos)
		return
	}
	f.a.prog.wantBodies(pkg)
	f.unread(pos, fmt.Sprintf("%s (%s) is outside the main module, whose code extract does not read: outside fx", f.callText(cc), funcName(callee)),
		"route its effect through fx (fx.Store, fx.HTTPClient, fx.Send, …) or wrap the call in fx.Raw(ctx, \"what\", fn); a call that changes nothing costs only a stored response")
}

// funcValue classifies a call through a function value extract did not see
// made: the functions it may hold where they can be traced, else an effect
// outside fx.
func (f *frame) funcValue(in ssa.CallInstruction, cc *ssa.CallCommon, pos token.Pos) {
	if f.taintOf(cc.Value)&tOke != 0 {
		return // a live feed's send
	}
	var fns []*ssa.Function
	unresolved, leaves := false, 0
	f.a.ix.origins(cc.Value, nil, func(v ssa.Value, _ *ctxt) {
		leaves++
		switch x := v.(type) {
		case *ssa.Function:
			fns = append(fns, x)
		case *ssa.MakeClosure:
			fns = append(fns, x.Fn.(*ssa.Function))
		case *ssa.Const:
			// nil
		default:
			// A function a call of oke's or the standard library's
			// returned (a cancel func, an unsubscribe): the callee's
			// kind.
			if callee := resultOf(v); callee != nil && inOke(callee) {
				return
			} else if callee != nil && len(callee.Blocks) == 0 {
				if obj, ok := callee.Object().(*types.Func); ok && obj.Pkg() != nil && isStd(obj.Pkg().Path()) {
					if e, _ := stdLookup(obj); e.kind == stdPure || e.kind == stdWriter {
						return
					}
				}
			}
			unresolved = true
		}
	})
	text := f.callText(cc)
	if unresolved || leaves == 0 {
		f.outsideFx(pos, fmt.Sprintf("%s: a function value extract cannot trace to its function: outside fx", text),
			"call the function directly, or route its effect through fx (or fx.Raw) so oke records it")
		return
	}
	seen := map[*ssa.Function]bool{}
	for _, fn := range fns {
		if seen[fn] {
			continue
		}
		seen[fn] = true
		f.target(in, cc, fn, pos, text+" (holds "+fn.Name()+")")
	}
}

// converted includes, for a value of a main-module type converted to an
// interface, what each of its methods does: code extract does not read
// (the standard library's, another module's) may call them through the
// interface (io.Copy calls Write, json.Marshal calls MarshalJSON).
func (f *frame) converted(mi *ssa.MakeInterface) {
	t := mi.X.Type()
	if !f.a.bodyType(t) {
		return
	}
	if f.ifaces == nil {
		f.ifaces = map[types.Type]bool{}
	}
	key := t
	if p, ok := t.(*types.Pointer); ok {
		key = p.Elem()
	}
	if f.ifaces[key] {
		return
	}
	f.ifaces[key] = true
	ms := f.a.prog.ssa.MethodSets.MethodSet(types.NewPointer(key))
	for i := 0; i < ms.Len(); i++ {
		fn := f.a.prog.ssa.MethodValue(ms.At(i))
		if fn == nil || len(fn.Blocks) == 0 || inOke(fn) {
			continue
		}
		f.include(f.a.summarize(fn, f.a.topEnv(fn)), mi, f.hop(mi.Pos(), fmt.Sprintf("%s as an interface (its method %s)", typeName(t), ms.At(i).Obj().Name())))
	}
}

// resultOf returns the static callee whose result v is (a call, or one
// result of a call), or nil.
func resultOf(v ssa.Value) *ssa.Function {
	switch x := v.(type) {
	case *ssa.Call:
		return x.Call.StaticCallee()
	case *ssa.Extract:
		if c, ok := x.Tuple.(*ssa.Call); ok {
			return c.Call.StaticCallee()
		}
	}
	return nil
}
