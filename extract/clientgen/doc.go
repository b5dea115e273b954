// Package clientgen writes a typed Go client for an app's flows (DESIGN.md
// section 10; the command is `oke gen client`): one method per HTTP or RPC
// binding, grouped by the first part of the flow's name, built on the
// client package — api.Payments.Charge(ctx, in, opts...) — from what
// extract found: the bindings, each flow's key rule from its contract, and
// the flows' own Go input and output types (imported where the generated
// package may import them, copied otherwise).
//
// It lives beside extract because it is a writer of extract's result, like
// the contract and the OpenAPI document: it needs the go/types of the flows,
// which only a load of the app's code has. The client package it targets
// imports nothing of this (nor of oke): a generated client links only
// client, the app's type packages and the standard library.
//
// See docs/client.md. The API of this package is for the oke command and
// its tests; it may change.
package clientgen
