// Package clock is a helper package with no fx: what its functions reach
// is found by oke vet through analysis facts.
package clock

import "time"

func now() time.Time { return time.Now() }

// Stamp reaches time.Now through now.
func Stamp() string { return now().Format(time.RFC3339) }
