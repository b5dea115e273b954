// Package console holds the oke console's web page: one HTML page, its
// script and its style sheet, written by hand and embedded with go:embed
// (no build step, no Node at run time). package admin serves them behind
// the admin gate at / and /ui/… of its handler, beside the JSON API the
// script reads; docs/console.md describes the pages, the markup outside
// tests rely on, and the security model.
//
// The script builds every element with document.createElement, textContent
// and setAttribute — never through the HTML parser — so nothing the app stored (a flow's
// input, a stored body) can become markup or script; the page's
// Content-Security-Policy (set by package admin) allows scripts only from
// the handler itself, none inline.
package console

import (
	"embed"
	"io/fs"
)

//go:embed assets
var assets embed.FS

// Assets are the console's files served under /ui/: app.js and app.css.
var Assets = mustSub(assets, "assets/ui")

// Index is the console's page, served at /.
var Index = mustRead(assets, "assets/index.html")

func mustSub(f fs.FS, dir string) fs.FS {
	s, err := fs.Sub(f, dir)
	if err != nil {
		panic(err)
	}
	return s
}

func mustRead(f fs.FS, name string) []byte {
	b, err := fs.ReadFile(f, name)
	if err != nil {
		panic(err)
	}
	return b
}
