package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"

	"github.com/okengine/oke/extract/clientgen"
)

// okeModule is the module whose client package generated clients import.
const okeModule = "github.com/okengine/oke"

// clientMod is where a generated client lives: its package's import path,
// whether `oke gen client` must write DIR/go.mod (-module), and a note for
// the user when the module that holds DIR cannot build the client yet.
type clientMod struct {
	importPath string
	writeGoMod bool
	note       string
}

// clientModule decides the module of a client written to dir.
//
//   - With -module PATH, dir is a module of its own: DIR/go.mod is written
//     unless it is there already (and then it must declare PATH). A client
//     that imports the app's types cannot be one: a new module does not
//     require the app's.
//   - Else dir must be inside a module (the app's or another). A
//     standalone client needs only github.com/okengine/oke from it; when
//     that module does not require it, the note says how to add it.
func clientModule(dir, modPath string, importTypes bool) (clientMod, error) {
	if modPath != "" {
		if importTypes {
			return clientMod{}, errors.New("-module makes DIR a module of its own, which cannot import the app's packages: drop -import-types (a standalone client), or -o a directory inside a module that requires the app's")
		}
		if err := module.CheckPath(modPath); err != nil {
			return clientMod{}, fmt.Errorf("-module %q is not a module path: %v", modPath, err)
		}
		gomod, have, err := clientgen.FindModule(dir)
		if err == nil && gomod == filepath.Join(dir, "go.mod") {
			if have != modPath {
				return clientMod{}, fmt.Errorf("%s declares module %s, not %s: pass -module %s, or leave -module out", gomod, have, modPath, have)
			}
			return clientMod{importPath: modPath}, nil
		}
		if err != nil && !errors.Is(err, clientgen.ErrNoModule) {
			return clientMod{}, err
		}
		return clientMod{importPath: modPath, writeGoMod: true}, nil
	}
	importPath, err := clientgen.ImportPath(dir)
	if errors.Is(err, clientgen.ErrNoModule) {
		if importTypes {
			return clientMod{}, fmt.Errorf("%w; a client that imports the app's types belongs in a module that requires the app's: -o a directory inside one", err)
		}
		return clientMod{}, fmt.Errorf("%w; pass -module PATH to make it a module of its own (oke gen client writes DIR/go.mod), or -o a directory inside the module that will build the client", err)
	}
	if err != nil {
		return clientMod{}, err
	}
	m := clientMod{importPath: importPath}
	gomod, have, _ := clientgen.FindModule(dir)
	if have != okeModule && !requires(gomod, okeModule) {
		m.note = fmt.Sprintf("%s (module %s) does not require %s yet: run go get %s/client there, or the client will not build", relToWD(gomod), have, okeModule, okeModule)
	}
	return m, nil
}

// requires reports whether the go.mod named gomod requires mod.
func requires(gomod, mod string) bool {
	data, err := os.ReadFile(gomod)
	if err != nil {
		return false
	}
	f, err := modfile.ParseLax(gomod, data, nil)
	if err != nil {
		return false
	}
	for _, r := range f.Require {
		if r.Mod.Path == mod {
			return true
		}
	}
	return false
}

// writeGoMod writes dir/go.mod for a standalone client's own module: its
// module line, the go line of the toolchain that built oke, and, when this
// oke knows its own version, a requirement of github.com/okengine/oke at
// that version (the client package the code was generated for). The
// user's go mod tidy adds the rest, and go.sum.
func writeGoMod(dir, modPath string) (string, error) {
	f := new(modfile.File)
	f.AddModuleStmt(modPath)
	if err := f.AddGoStmt(goLine()); err != nil {
		return "", err
	}
	if v := okeVersion(); v != "" {
		if err := f.AddRequire(okeModule, v); err != nil {
			return "", err
		}
	}
	data, err := f.Format()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	name := filepath.Join(dir, "go.mod")
	// O_EXCL: never replace a go.mod that appeared meanwhile.
	out, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return "", fmt.Errorf("write %s: %w", name, err)
	}
	_, werr := out.Write(data)
	if cerr := out.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return "", fmt.Errorf("write %s: %w", name, werr)
	}
	return name, nil
}

// goLine is the go line of a client's go.mod: the language version of the
// toolchain that built this oke (which is at least what oke needs).
func goLine() string { return goLineOf(runtime.Version()) }

// goLineOf is the go line for a toolchain version: "1.26" for "go1.26.8"
// or "go1.26rc1"; oke's own go line for a development toolchain.
func goLineOf(version string) string {
	major, rest, ok := strings.Cut(strings.TrimPrefix(version, "go"), ".")
	minor := rest
	if i := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		minor = rest[:i]
	}
	if !ok || minor == "" || !semver.IsValid("v"+major+"."+minor) {
		return "1.26"
	}
	return major + "." + minor
}

// okeVersion is the version of github.com/okengine/oke this tool was
// built from, when it is a real one (a release or a pseudo-version, not a
// local replacement or a checkout); "" otherwise.
func okeVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	v := ""
	if bi.Main.Path == okeModule {
		v = bi.Main.Version
	}
	for _, d := range bi.Deps {
		if d.Path == okeModule {
			if d.Replace != nil {
				return ""
			}
			v = d.Version
		}
	}
	if !semver.IsValid(v) {
		return ""
	}
	return v
}
