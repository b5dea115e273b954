// Package withtests has a finding in a file and one in a test file: oke vet
// checks test files unless -tests=false, and reports a file's finding once
// although the package and its test variant both hold it.
package withtests

import (
	"context"
	"time"

	"github.com/okengine/oke"
)

var Flow = oke.NewFlow("withtests.flow", oke.Options{Durable: true},
	func(ctx context.Context, in struct{}, fx *oke.Fx) (oke.Response[string], error) {
		return oke.OK(time.Now().String()), nil
	})
