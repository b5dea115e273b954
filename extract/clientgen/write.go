package clientgen

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// ErrNoModule is returned (wrapped) by ImportPath and FindModule for a
// directory that no go.mod holds.
var ErrNoModule = errors.New("not inside a Go module")

// ImportPath returns the import path of the package in dir (which need not
// exist yet), from the go.mod of the module that holds it.
func ImportPath(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	gomod, mod, err := FindModule(abs)
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(filepath.Dir(gomod), abs)
	if err != nil {
		return "", err
	}
	if rel == "." {
		return mod, nil
	}
	return mod + "/" + filepath.ToSlash(rel), nil
}

// FindModule returns the go.mod that holds dir (in dir or above it; dir
// need not exist yet) and the module path it declares. The error wraps
// ErrNoModule when there is none.
func FindModule(dir string) (gomod, modPath string, err error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", "", err
	}
	for d := abs; ; d = filepath.Dir(d) {
		name := filepath.Join(d, "go.mod")
		data, err := os.ReadFile(name)
		if err == nil {
			mod := modulePath(data)
			if mod == "" {
				return "", "", fmt.Errorf("%s has no module line", name)
			}
			return name, mod, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", "", err
		}
		if filepath.Dir(d) == d {
			return "", "", fmt.Errorf("%s is %w (no go.mod in it or above it)", abs, ErrNoModule)
		}
	}
}

// modulePath reads the module line of a go.mod.
func modulePath(gomod []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		rest, ok := strings.CutPrefix(line, "module")
		if !ok || rest == "" || rest[0] != ' ' && rest[0] != '\t' && rest[0] != '"' {
			continue
		}
		rest = strings.TrimSpace(rest)
		if i := strings.Index(rest, "//"); i >= 0 {
			rest = strings.TrimSpace(rest[:i])
		}
		if u, err := strconv.Unquote(rest); err == nil {
			return u
		}
		return rest
	}
	return ""
}

// IsGenerated reports whether src is a file Generate wrote (its first line
// is Header).
func IsGenerated(src []byte) bool {
	line, _, _ := bytes.Cut(src, []byte("\n"))
	return string(bytes.TrimRight(line, "\r")) == Header
}

// CheckDir checks that the client can be written to dir as package pkg: the
// other Go files there (tests aside) belong to pkg, and an existing
// FileName is one Generate wrote.
func CheckDir(dir, pkg string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	names := map[string][]string{}
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		file := filepath.Join(dir, n)
		if n == FileName {
			src, err := os.ReadFile(file)
			if err != nil {
				return err
			}
			if !IsGenerated(src) {
				return fmt.Errorf("%s was not written by oke gen client (its first line is not %q); move it away, or pick another -o", file, Header)
			}
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.PackageClauseOnly)
		if err != nil {
			return err
		}
		if name := f.Name.Name; name != pkg {
			names[name] = append(names[name], n)
		}
	}
	if len(names) > 0 {
		var other []string
		for name := range names {
			other = append(other, name)
		}
		sort.Strings(other)
		return fmt.Errorf("%s holds package %s (%s), not %s: pass -pkg %s, or pick another -o", dir, other[0], strings.Join(names[other[0]], ", "), pkg, other[0])
	}
	return nil
}

// Write writes src to dir/FileName atomically: to a temporary file beside
// it, renamed into place, so that a failure leaves the old file (or none)
// whole. It creates dir if needed and returns the file's name.
func Write(dir string, src []byte) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	name := filepath.Join(dir, FileName)
	f, err := os.CreateTemp(dir, "."+FileName+".*.tmp")
	if err != nil {
		return "", err
	}
	_, werr := f.Write(src)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Chmod(f.Name(), 0o644)
	}
	if werr == nil {
		werr = os.Rename(f.Name(), name)
	}
	if werr != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("write %s: %w", name, werr)
	}
	return name, nil
}
