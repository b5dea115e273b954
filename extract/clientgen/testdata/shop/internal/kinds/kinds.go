// Package kinds holds types of the shop fixture that a client outside
// testdata/shop may not import (an internal package): oke gen client copies
// those it needs.
package kinds

// Kind is a kind of item.
type Kind string

// Dims are an item's dimensions.
type Dims struct {
	W    int    `json:"w"`
	H    int    `json:"h"`
	Unit string `json:"unit,omitempty"`
}
