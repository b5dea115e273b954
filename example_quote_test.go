package oke_test

import (
	"fmt"
	"strings"

	"github.com/okengine/oke"
)

// An id a client sent, echoed in an error message: whole when short, cut
// to 64 bytes with its length when not.
func ExampleQuote() {
	fmt.Println(oke.ErrNotFound.WithMessage("No charge has id %s.", oke.Quote("ch_42")).Message)
	fmt.Println(oke.ErrNotFound.WithMessage("No charge has id %s.", oke.Quote(strings.Repeat("x", 60<<10))).Message)
	// Output:
	// No charge has id "ch_42".
	// No charge has id "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx…" (61440 bytes).
}
