// Package clientgen writes a typed Go client for an app's flows (DESIGN.md
// section 10; the command is `oke gen client`): one method per HTTP or RPC
// binding, grouped by the first part of the flow's name, built on the
// client package — api.Payments.Charge(ctx, in, opts...) — from what
// extract found: the bindings, each flow's key rule from its contract, and
// copies of the flows' own Go input and output types. By default the client
// stands alone: it imports only the standard library and the client package,
// so a program that uses it links neither the app nor what the app imports
// (its database drivers); Config.ImportTypes imports the app's types instead
// where the generated package may import them.
//
// It lives beside extract because it is a writer of extract's result, like
// the contract and the OpenAPI document: it needs the go/types of the flows,
// which only a load of the app's code has. The client package it targets
// imports nothing of this (nor of oke): a generated client links only
// client and the standard library (and, with ImportTypes, the app's type
// packages).
//
// See docs/client.md. The API of this package is for the oke command and
// its tests; it may change.
package clientgen
