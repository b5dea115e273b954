// Package ignore holds the cases of rule ignorereason.
package ignore

import (
	"context"
	"time"

	"github.com/okengine/oke"
)

type In struct{}
type Out struct{}

var Flow = oke.NewFlow("ignore.flow", oke.Options{Durable: true},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		// want +1 `^//oke:ignore needs a reason: say why the line is safe to run again on every pick-up \(//oke:ignore the value is only logged\); without one it silences nothing$`
		//oke:ignore
		_ = time.Now()
		// want +1 `needs a reason`
		_ = time.Now() //oke:ignore
		// want +1 `needs a reason`
		_ = time.Now() //oke:ignore
		_ = time.Now() //oke:ignore a reason is enough
		//oke:ignored is not the directive
		// oke:ignore with a space is a plain comment
		return oke.OK(Out{}), nil
	})

// A bare directive is reported anywhere in the package.
func elsewhere() {
	// want +1 `needs a reason`
	//oke:ignore
}
