// Package maporder holds the cases of rule maporder: map iteration order
// that flows into something kept or answered outside a step.
package maporder

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"deep"

	"github.com/okengine/oke"
)

type In struct{ Tags map[string]int }
type Out struct {
	Keys []string
	S    string
	N    int
}

func use(v ...any) {}

var Bad = oke.NewFlow("maporder.bad", oke.Options{Durable: true},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		var keys []string
		for k := range in.Tags {
			keys = append(keys, k)
		}
		s := ""
		for k := range in.Tags {
			s += k
		}
		var b strings.Builder
		for k, v := range in.Tags {
			fmt.Fprintf(&b, "%s=%d;", k, v)
		}
		use(b.String()) // want `^map order outside a step in durable flow "maporder.bad": b is written in a range over a map \(maporder.go:\d+\), and its value is used here: the order changes from one pick-up to the next, so what is saved or answered differs; range over sorted keys \(for _, k := range slices.Sorted\(maps.Keys\(m\)\)\), or sort the result$`
		all := slices.Collect(maps.Keys(in.Tags))
		use(all)                // want `^map order outside a step .*: all holds slices.Collect of maps.Keys\(in.Tags\) \(maporder.go:\d+\), and its value is used here`
		use(deep.Keys(in.Tags)) // want `^map order outside a step .*: the result of deep.Keys, in map order \(slice out is appended to in a range over a map at deep.go:\d+\) is used here as it comes`
		ch := make(chan string, len(in.Tags))
		for k := range in.Tags {
			ch <- k // want `^map order outside a step .*: a send on ch inside a range over a map \(maporder.go:\d+\) sends in map order`
		}
		for k := range in.Tags {
			return oke.OK(Out{S: k}), nil // want `^map order outside a step .*: a return at the end of a range over a map \(maporder.go:\d+\) answers with whichever element comes first`
		}
		return oke.OK(Out{Keys: keys, S: s}), nil // want `slice keys is appended to in a range over a map` `string s is built in a range over a map`
	})

var Good = oke.NewFlow("maporder.good", oke.Options{Durable: true},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		var keys []string
		for _, k := range slices.Sorted(maps.Keys(in.Tags)) {
			keys = append(keys, k)
		}
		total, n, most := 0, 0, 0
		copied := map[string]int{}
		for k, v := range in.Tags {
			total += v
			n++
			if v > most {
				most = v
			}
			copied[k] = v
		}
		var later []string
		for k := range in.Tags {
			later = append(later, k)
		}
		sort.Strings(later)
		var counted []string
		for k := range in.Tags {
			counted = append(counted, k)
		}
		found := ""
		for k, v := range in.Tags {
			if v == 42 {
				found = k
			}
		}
		saved, _ := oke.Step(ctx, "keys", func(ctx context.Context) ([]string, error) {
			var ks []string
			for k := range in.Tags {
				ks = append(ks, k)
			}
			return ks, nil
		})
		use(deep.SortedKeys(in.Tags), deep.Total(in.Tags), later, len(counted), copied, found, saved)
		return oke.OK(Out{Keys: keys, N: total + n + most}), nil
	})
