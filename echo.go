package oke

import "github.com/okengine/oke/internal/httpx"

// Quote quotes s — an id, a key, a field name, anything a client sent —
// for an error message or a log line: strconv.Quote's quoting, cut to its
// first 64 bytes (with the whole length) when longer, so that an error
// answer never echoes a 60 KB id back in full:
//
//	return oke.ErrNotFound.WithMessage("No charge has id %s.", oke.Quote(id))
//	// {"error":{"code":"NotFound","message":"No charge has id \"ch_x…\" (61440 bytes)."}}
//
// oke's own messages quote client input with it. As a last bound, an
// error envelope's message longer than 512 bytes is cut, whoever built it.
func Quote(s string) string { return httpx.Quote(s) }
