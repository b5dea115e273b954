package main

import (
	"fmt"
	"math/rand/v2"
	"sync"

	"github.com/okengine/oke/internal/nemesis"
)

// keyspace is the run's keys: charge keys, each with an amount of its own
// (so a charge row names its key), and refund keys, each refunding one
// acknowledged charge (so a refund row names its key by its charge).
type keyspace struct {
	prefix string

	mu       sync.Mutex
	next     int64
	keys     []string
	amounts  map[string]int64  // charge key → amount
	refundOf map[string]string // refund key → the charge it refunds
	acked    []string          // acknowledged charge ids no refund key has taken yet
	seen     map[string]bool   // charge ids seen acknowledged
}

func newKeyspace(prefix string) *keyspace {
	return &keyspace{prefix: prefix, amounts: map[string]int64{}, refundOf: map[string]string{}, seen: map[string]bool{}}
}

func (ks *keyspace) newCharge() string {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	ks.next++
	k := fmt.Sprintf("%s-%08d", ks.prefix, ks.next)
	ks.amounts[k] = 1000 + ks.next
	ks.keys = append(ks.keys, k)
	return k
}

// newRefund takes an acknowledged charge no refund key has yet.
func (ks *keyspace) newRefund() (string, bool) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if len(ks.acked) == 0 {
		return "", false
	}
	id := ks.acked[len(ks.acked)-1]
	ks.acked = ks.acked[:len(ks.acked)-1]
	ks.next++
	k := fmt.Sprintf("%s-%08d-refund", ks.prefix, ks.next)
	ks.refundOf[k] = id
	ks.keys = append(ks.keys, k)
	return k, true
}

func (ks *keyspace) old(r *rand.Rand) (string, bool) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if len(ks.keys) == 0 {
		return "", false
	}
	return ks.keys[r.IntN(len(ks.keys))], true
}

func (ks *keyspace) all() []string {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	return append([]string(nil), ks.keys...)
}

// send sends key's request (a charge or a refund) to in and notes an
// acknowledged charge for a later refund.
func (ks *keyspace) send(rec *nemesis.Recorder, in *nemesis.Instance, client int, phase nemesis.Phase, key string) nemesis.Op {
	ks.mu.Lock()
	charge, isRefund := ks.refundOf[key]
	amount := ks.amounts[key]
	ks.mu.Unlock()
	if isRefund {
		return rec.Refund(in.URL(), in.Name, client, phase, key, charge)
	}
	op := rec.Charge(in.URL(), in.Name, client, phase, key, amount)
	if op.Acked() && phase == nemesis.PhaseLoad {
		if id := op.AnswerID(); id != "" {
			ks.mu.Lock()
			if !ks.seen[id] {
				ks.seen[id] = true
				ks.acked = append(ks.acked, id)
			}
			ks.mu.Unlock()
		}
	}
	return op
}

// storeRows is what the business store holds at the end.
type storeRows struct {
	charges  map[int64][]string               // amount → charge ids
	refunds  map[string][]string              // charge id → refund ids
	provider map[string]nemesis.ProviderCalls // charge id → the provider's refunds and requests
}

// effects maps the rows to the keys that made them.
func (ks *keyspace) effects(rows storeRows) nemesis.Effects {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	eff := nemesis.Effects{Charges: map[string][]string{}, Provider: map[string]nemesis.ProviderCalls{}}
	byAmount := map[int64]string{}
	for k, a := range ks.amounts {
		byAmount[a] = k
	}
	for a, ids := range rows.charges {
		if k, ok := byAmount[a]; ok {
			eff.Charges[k] = ids
		} else {
			eff.Phantom = append(eff.Phantom, ids...)
		}
	}
	for k, charge := range ks.refundOf {
		if ids := rows.refunds[charge]; len(ids) > 0 {
			eff.Charges[k] = ids
		}
		eff.Provider[k] = rows.provider[charge]
	}
	return eff
}
