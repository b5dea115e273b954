// Package broken does not type-check: oke vet must say so (exit 2), not
// pass it.
package broken

var x int = "not an int"
