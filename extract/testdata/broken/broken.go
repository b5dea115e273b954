// Package broken does not compile: oke extract exits 2.
package broken

import "github.com/okengine/oke"

var _ = oke.NoSuchThing
