// Package deep holds helpers that take no fx, for the cross-package rules:
// what they reach is found through analysis facts, whatever the depth.
package deep

import (
	"context"
	"math/rand"
	"os"
	"sort"
	"time"

	"github.com/okengine/oke"
)

func now() time.Time { return time.Now() }

// Stamp reaches time.Now through now.
func Stamp() string { return now().Format(time.RFC3339) }

// Env reads the environment.
func Env() string { return os.Getenv("MODE") }

// Mode is assigned by SetMode: it is mutable.
var Mode = "a"

func SetMode(m string) { Mode = m }

// Fixed is never assigned after its declaration.
var Fixed = "b"

// Table is filled in init only.
var Table map[string]int

func init() { Table = map[string]int{"a": 1} }

// Pure is deterministic.
func Pure(a, b int) int { return a + b + len(Fixed) + Table["a"] }

// Clock is a function variable bound to time.Now.
var Clock = time.Now

// Wait chooses between two channels.
func Wait(a, b chan int) int {
	select {
	case x := <-a:
		return x
	case y := <-b:
		return y
	}
}

// Recv waits on one channel: deterministic.
func Recv(a chan int) int {
	select {
	case x := <-a:
		return x
	}
}

type Svc struct{}

func (Svc) Now() time.Time        { return time.Now() }
func (Svc) Add(a, b int) int      { return a + b }
func (s Svc) Roll() int           { return s.deeper() }
func (Svc) deeper() int           { return level1() }
func level1() int                 { return level2() }
func level2() int                 { return rand.Intn(6) }
func (Svc) Sleep(d time.Duration) { time.Sleep(d) }

// Keys is in map order.
func Keys(m map[string]int) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// SortedKeys is not.
func SortedKeys(m map[string]int) []string {
	out := Keys(m)
	sort.Strings(out)
	return out
}

// Total sums a map: the order does not matter.
func Total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// SavedNow takes the time in a step: deterministic.
func SavedNow(ctx context.Context) (time.Time, error) {
	return oke.Step(ctx, "now", func(ctx context.Context) (time.Time, error) { return time.Now(), nil })
}

// Since is generic and reaches time.Now.
func Since[T any](v T) (T, time.Duration) { return v, time.Until(time.Time{}) }

// First is generic and deterministic.
func First[T any](xs []T) T { return xs[0] }

// StampStep is a step's function that reaches time.Now.
func StampStep(ctx context.Context) (string, error) { return Stamp(), nil }

// Save is a function variable bound to a literal that writes the environment's value.
var Save = func() string { return os.Getenv("SAVE") }
