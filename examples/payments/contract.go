package main

import (
	_ "embed"

	"github.com/okengine/oke/admin"
)

// The demo's generated contract (go generate in package app writes it), for
// the console: with it the flows page shows why oke extract inferred each
// effect.
//
//go:embed oke.contract.json
var contractJSON []byte

func init() {
	if err := admin.RegisterContract(contractJSON); err != nil {
		panic(err)
	}
}
