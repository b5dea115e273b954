package nemesis

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// The key's register: the answer a key stores, written at most once. Its
// state is the stored answer ("" while none is). An operation is one POST
// with the key:
//
//   - a live 2xx (no Idempotent-Replayed) writes its answer: it may only
//     linearize while nothing is stored;
//   - a replayed 2xx reads: the stored answer must be its answer;
//   - an operation that may have run without saying so (no answer, 503
//     OutcomeUnknown, an unexpected error) may have written any answer the
//     key was ever seen with, or nothing, at any time after its call: its
//     return is the end of the history, as in Jepsen's "info" operations;
//   - a 409 or 503 StoreUnavailable did nothing and is left out.
//
// The model is nondeterministic (an unknown operation has several next
// states) and partitioned by key.

// regInput is an operation's input to the model: its key.
type regInput struct{ key string }

// regOutput is what it answered.
type regOutput struct {
	known    bool   // a 2xx: answer and replayed are meaningful
	answer   string // status, Location and body
	replayed bool
}

// registerModel is the porcupine model; candidates lists, per key, every
// 2xx answer the key was seen with (what an unknown operation may have
// written).
func registerModel(candidates map[string][]string) porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
			byKey := map[string][]porcupine.Operation{}
			var keys []string
			for _, op := range h {
				k := op.Input.(regInput).key
				if _, ok := byKey[k]; !ok {
					keys = append(keys, k)
				}
				byKey[k] = append(byKey[k], op)
			}
			out := make([][]porcupine.Operation, 0, len(keys))
			for _, k := range keys {
				out = append(out, byKey[k])
			}
			return out
		},
		Init: func() []interface{} { return []interface{}{""} },
		Step: func(state, input, output interface{}) []interface{} {
			s := state.(string)
			in, out := input.(regInput), output.(regOutput)
			switch {
			case !out.known:
				next := []interface{}{s}
				if s == "" {
					for _, c := range candidates[in.key] {
						next = append(next, c)
					}
				}
				return next
			case out.replayed:
				if s == out.answer {
					return []interface{}{s}
				}
				return nil
			default: // live
				if s == "" {
					return []interface{}{out.answer}
				}
				return nil
			}
		},
		DescribeOperation: func(input, output interface{}) string {
			out := output.(regOutput)
			switch {
			case !out.known:
				return "unknown"
			case out.replayed:
				return "replay " + out.answer
			}
			return "live " + out.answer
		},
	}
	return nm.ToModel()
}

// checkLinearizable checks the key's register of every key in ops with
// porcupine, and returns the keys whose history is not linearizable (or
// could not be decided within timeout: then with "undecided" in the
// reason), each with a one-line reason.
func checkLinearizable(ops []Op, timeout time.Duration) map[string]string {
	candidates := map[string][]string{}
	seen := map[string]bool{}
	for _, o := range ops {
		if o.Acked() && !seen[o.Key+"\x00"+o.answer()] {
			seen[o.Key+"\x00"+o.answer()] = true
			candidates[o.Key] = append(candidates[o.Key], o.answer())
		}
	}
	var h []porcupine.Operation
	for _, o := range ops {
		if o.NotRun() {
			continue
		}
		ret := int64(o.Return)
		out := regOutput{known: o.Acked(), replayed: o.Replayed}
		if out.known {
			out.answer = o.answer()
		} else {
			ret = math.MaxInt64 // may take effect any time after its call
		}
		h = append(h, porcupine.Operation{ClientId: o.Client, Input: regInput{o.Key}, Call: int64(o.Call), Output: out, Return: ret})
	}
	bad := map[string]string{}
	if len(h) == 0 {
		return bad
	}
	model := registerModel(candidates)
	// One check per key keeps a bad key's reason its own, and lets every
	// other key be decided when one is slow.
	for _, part := range model.Partition(h) {
		key := part[0].Input.(regInput).key
		res := porcupine.CheckOperationsTimeout(model, part, timeout)
		switch res {
		case porcupine.Ok:
		case porcupine.Illegal:
			bad[key] = "not linearizable: " + describeRegister(part)
		default:
			bad[key] = fmt.Sprintf("undecided within %s (porcupine: %s)", timeout, res)
		}
	}
	return bad
}

// describeRegister is a key's register history, in call order, for a
// violation's reason.
func describeRegister(part []porcupine.Operation) string {
	sorted := append([]porcupine.Operation(nil), part...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Call < sorted[j].Call })
	s := ""
	for i, op := range sorted {
		if i > 0 {
			s += "; "
		}
		out := op.Output.(regOutput)
		ret := "∞"
		if op.Return != math.MaxInt64 {
			ret = fmt.Sprintf("%.3fs", time.Duration(op.Return).Seconds())
		}
		kind := "unknown"
		switch {
		case out.known && out.replayed:
			kind = "replay"
		case out.known:
			kind = "live"
		}
		s += fmt.Sprintf("%s [%.3fs,%s]", kind, time.Duration(op.Call).Seconds(), ret)
	}
	return s
}
