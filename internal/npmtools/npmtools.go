// Package npmtools finds the npm tools some tests run (node, and the
// packages scripts/npmtools installs at the versions
// scripts/npm/package-lock.json pins), for tests that check oke's outputs
// with an independent tool written in JavaScript.
//
// The tools live in $OKE_NPM_TOOLS (scripts/test sets it from
// scripts/npmtools), else in ~/.cache/oke-npmtools, where scripts/npmtools
// puts them by default. When node or the tools cannot be found a test fails
// if $CI is set — CI must run these checks — and is skipped with a message
// saying how to get them otherwise.
package npmtools

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Dir returns the folder that holds the tools' node_modules, or "" when
// there is none.
func Dir() string {
	dirs := []string{os.Getenv("OKE_NPM_TOOLS")}
	if c, err := os.UserCacheDir(); err == nil {
		dirs = append(dirs, filepath.Join(c, "oke-npmtools"))
	}
	for _, d := range dirs {
		if d == "" {
			continue
		}
		if fi, err := os.Stat(filepath.Join(d, "node_modules")); err == nil && fi.IsDir() {
			return d
		}
	}
	return ""
}

// Bin returns the path of the installed tool name (node_modules/.bin/name)
// and of node, failing or skipping the test (see the package doc) when
// either is missing.
func Bin(t testing.TB, name string) (node, bin string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		missing(t, "no node on PATH")
	}
	dir := Dir()
	if dir == "" {
		missing(t, "no npm tools in $OKE_NPM_TOOLS or ~/.cache/oke-npmtools")
	}
	bin = filepath.Join(dir, "node_modules", ".bin", name)
	if _, err := os.Stat(bin); err != nil {
		missing(t, "the npm tools in "+dir+" have no "+name+" (scripts/npm/package.json changed since they were installed?)")
	}
	return node, bin
}

func missing(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("%s, and CI is set, so this check must run: run scripts/npmtools (as root it installs Debian's nodejs and npm first) and set OKE_NPM_TOOLS to the folder it prints", why)
	}
	t.Skipf("%s: this check needs node and the pinned npm tools; run scripts/npmtools (as root it installs Debian's nodejs and npm first) and set OKE_NPM_TOOLS to the folder it prints", why)
}
