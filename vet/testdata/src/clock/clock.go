// Package clock wraps package deep: the chain crosses two packages.
package clock

import "deep"

// Stamp reaches time.Now through deep.Stamp.
func Stamp() string { return deep.Stamp() }

// Same is deterministic.
func Same(a, b int) int { return deep.Pure(a, b) }
