// Command oke-vet runs oke vet's analyzers (package
// github.com/okengine/oke/vet), which check durable flows against the rules
// of durable steps. Use it as a vet tool:
//
//	go install github.com/okengine/oke/cmd/oke-vet
//	go vet -vettool=$(which oke-vet) ./...
//
// or on its own, like any multichecker: oke-vet ./... (-help lists the
// analyzers and their flags; -NAME=false turns one off). `oke vet` runs the
// same analyzers with its own output (FILE:LINE:COL: message, or -json).
// See docs/vet.md.
package main

import (
	"golang.org/x/tools/go/analysis/multichecker"

	"github.com/okengine/oke/vet"
)

func main() { multichecker.Main(vet.Analyzers...) }
