package vet

import (
	"go/ast"
	"go/constant"
	"go/types"
	"strings"

	"github.com/okengine/oke"
)

// ioFuncs are the package-level functions of the standard library that do
// raw I/O a durable flow must not repeat outside a step: network calls,
// file writes, processes. A nil set means every exported function of the
// package but those in ioExempt.
var ioFuncs = map[string]map[string]bool{
	"net": set("Dial", "DialTimeout", "DialTCP", "DialUDP", "DialIP", "DialUnix", "Listen", "ListenPacket",
		"ListenTCP", "ListenUDP", "ListenIP", "ListenUnix", "ListenUnixgram", "ListenMulticastUDP",
		"LookupHost", "LookupIP", "LookupAddr", "LookupCNAME", "LookupMX", "LookupTXT", "LookupSRV", "LookupNS", "LookupPort"),
	"net/http": set("Get", "Head", "Post", "PostForm"),
	"net/smtp": set("SendMail"),
	"os": set("WriteFile", "Create", "CreateTemp", "OpenFile", "Remove", "RemoveAll", "Rename", "Mkdir", "MkdirAll",
		"MkdirTemp", "Chmod", "Chown", "Lchown", "Chtimes", "Truncate", "Symlink", "Link", "Setenv", "Unsetenv",
		"Clearenv", "StartProcess"),
	"io/ioutil": set("WriteFile", "TempFile", "TempDir"),
	"syscall":   nil,
}

// ioExempt are the functions of a nil set of ioFuncs that are not I/O
// (syscall's getters; syscall.Getenv is rule nondetreach's).
var ioExempt = set("Getenv", "Getpid", "Getppid", "Getuid", "Geteuid", "Getgid", "Getegid", "Getpagesize",
	"BytePtrFromString", "ByteSliceFromString", "StringBytePtr", "StringByteSlice", "StringToUTF16", "UTF16ToString",
	"Errstr", "NsecToTimespec", "NsecToTimeval", "TimespecToNsec", "TimevalToNsec")

// ioMethods are the methods of standard-library types that do raw I/O:
// "path.Type" → methods. The query methods of database/sql are judged by
// their SQL (see ioHit).
var ioMethods = map[string]map[string]bool{
	"net.Dialer":         set("Dial", "DialContext"),
	"net.Resolver":       set("LookupHost", "LookupIP", "LookupIPAddr", "LookupAddr", "LookupCNAME", "LookupMX", "LookupTXT", "LookupSRV", "LookupNS", "LookupPort", "LookupNetIP"),
	"net.ListenConfig":   set("Listen", "ListenPacket"),
	"net/http.Client":    set("Do", "Get", "Head", "Post", "PostForm"),
	"net/http.Transport": set("RoundTrip"),
	"os.File":            set("Write", "WriteString", "WriteAt", "Truncate", "Chmod", "Chown", "ReadFrom"),
	"os.Process":         set("Kill", "Signal"),
	"os/exec.Cmd":        set("Run", "Start", "Output", "CombinedOutput"),
	"database/sql.DB":    set("Exec", "ExecContext", "Query", "QueryContext", "QueryRow", "QueryRowContext", "Begin", "BeginTx"),
	"database/sql.Tx":    set("Exec", "ExecContext", "Query", "QueryContext", "QueryRow", "QueryRowContext", "Commit"),
	"database/sql.Conn":  set("ExecContext", "QueryContext", "QueryRowContext", "BeginTx", "Raw"),
	"database/sql.Stmt":  set("Exec", "ExecContext", "Query", "QueryContext", "QueryRow", "QueryRowContext"),
}

func set(names ...string) map[string]bool {
	m := map[string]bool{}
	for _, n := range names {
		m[n] = true
	}
	return m
}

// ioHit says whether call is raw I/O of the standard library. A query
// through *sql.DB, *sql.Tx or *sql.Conn whose SQL is a constant read
// (oke.ClassifySQL) is not: reads are not reported, as for fx.Store.
func (p *pkg) ioHit(call *ast.CallExpr) (reachHit, bool) {
	fn := p.callee(call)
	if fn == nil || fn.Pkg() == nil {
		return reachHit{}, false
	}
	path := fn.Pkg().Path()
	recv := fn.Signature().Recv()
	if recv == nil {
		names, ok := ioFuncs[path]
		if !ok || !fn.Exported() || names == nil && ioExempt[fn.Name()] || names != nil && !names[fn.Name()] {
			return reachHit{}, false
		}
		return reachHit{Kind: hitIO, What: fn.Pkg().Name() + "." + fn.Name() + " (" + path + ")"}, true
	}
	t := recv.Type()
	if pt, ok := t.(*types.Pointer); ok {
		t = pt.Elem()
	}
	n, ok := types.Unalias(t).(*types.Named)
	if !ok || n.Obj().Pkg() == nil {
		return reachHit{}, false
	}
	key := n.Obj().Pkg().Path() + "." + n.Obj().Name()
	if !ioMethods[key][fn.Name()] {
		return reachHit{}, false
	}
	what := "(*" + n.Obj().Pkg().Name() + "." + n.Obj().Name() + ")." + fn.Name() + " (" + n.Obj().Pkg().Path() + ")"
	if path == "database/sql" && n.Obj().Name() != "Stmt" {
		switch fn.Name() {
		case "Query", "QueryContext", "QueryRow", "QueryRowContext":
			q := 0
			if strings.HasSuffix(fn.Name(), "Context") {
				q = 1
			}
			if q < len(call.Args) {
				if tv := p.info.Types[call.Args[q]]; tv.Value != nil && tv.Value.Kind() == constant.String &&
					oke.ClassifySQL(constant.StringVal(tv.Value)) == oke.EffectRead {
					return reachHit{}, false
				}
			}
		}
	}
	return reachHit{Kind: hitIO, What: what}, true
}
