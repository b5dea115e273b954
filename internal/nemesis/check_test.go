package nemesis

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// The histories below are written by hand: each row is a rule of the
// checker, with a history that keeps it and one that breaks it.

func s(sec float64) time.Duration { return time.Duration(sec * float64(time.Second)) }

// charge builds a 201 charge answer of key with charge id.
func ack(seq int, key, id string, call, ret float64, replayed bool) Op {
	return Op{Seq: seq, Client: seq % 3, Target: "a", Key: key, Call: s(call), Return: s(ret), Status: 201,
		RespBody: fmt.Sprintf(`{"id":%q,"amount":100,"currency":"usd"}`, id), Location: "/charges/" + id, Replayed: replayed}
}

func noAnswer(seq int, key string, call, ret float64, timeout bool) Op {
	return Op{Seq: seq, Key: key, Target: "a", Call: s(call), Return: s(ret), Err: "connection reset", Timeout: timeout}
}

func status(seq int, key string, call, ret float64, st int, code string) Op {
	return Op{Seq: seq, Key: key, Target: "a", Call: s(call), Return: s(ret), Status: st, Code: code, RetryAfter: "1"}
}

func refund(o Op) Op { o.Route = "/refunds"; return o }

func one(key, id string) map[string][]string { return map[string][]string{key: {id}} }

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name    string
		h       History
		eff     Effects
		promise Promise
		// want lists the non-zero counts, e.g. "lost=1"; empty: OK.
		want string
	}{
		{
			name: "an acknowledged key that replays its first answer is right",
			h: History{Ops: []Op{
				status(1, "k1", 0, 0.1, 409, "IdempotencyInProgress"),
				ack(2, "k1", "ch_1", 0, 0.2, false),
				ack(3, "k1", "ch_1", 0.3, 0.4, true),
			}},
			eff: Effects{Charges: one("k1", "ch_1")},
		},
		{
			name: "a live answer cut off by a crash, then replayed, is right",
			h: History{Ops: []Op{
				noAnswer(1, "k1", 0, 0.5, false),
				status(2, "k1", 0.6, 0.7, 503, "OutcomeUnknown"),
				ack(3, "k1", "ch_1", 1, 1.1, true),
			}},
			eff: Effects{Charges: one("k1", "ch_1")},
		},
		{
			name: "a lost acknowledgement: the acknowledged charge is not in the store",
			h: History{Ops: []Op{
				ack(1, "k1", "ch_1", 0, 0.1, false),
				ack(2, "k1", "ch_1", 1, 1.1, true),
			}},
			eff:  Effects{Charges: map[string][]string{}},
			want: "lost=1",
		},
		{
			name: "a lost acknowledgement: the key ran again after the crash",
			h: History{Ops: []Op{
				ack(1, "k1", "ch_1", 0, 0.1, false),
				noAnswer(2, "k1", 0.5, 0.6, false),
				ack(3, "k1", "ch_2", 1, 1.1, false),
			}},
			eff:  Effects{Charges: map[string][]string{"k1": {"ch_1", "ch_2"}}},
			want: "doubled=1 lost=1 not-linearizable=1 wrong=1",
		},
		{
			name: "a doubled effect where exactly-once is promised",
			h: History{Ops: []Op{
				noAnswer(1, "k1", 0, 0.5, false),
				ack(2, "k1", "ch_2", 1, 1.1, false),
			}},
			eff:  Effects{Charges: map[string][]string{"k1": {"ch_1", "ch_2"}}},
			want: "doubled=1",
		},
		{
			name: "one more effect where at-least-once is documented, after an attempt that may have run",
			h: History{Ops: []Op{
				noAnswer(1, "k1", 0, 0.5, false),
				ack(2, "k1", "ch_2", 1, 1.1, false),
			}},
			eff:     Effects{Charges: map[string][]string{"k1": {"ch_1", "ch_2"}}},
			promise: AtLeastOnce,
			want:    "extra=1",
		},
		{
			name: "two more effects where at-least-once allows one",
			h: History{Ops: []Op{
				noAnswer(1, "k1", 0, 0.5, false),
				noAnswer(2, "k1", 0.6, 0.7, false),
				ack(3, "k1", "ch_3", 1, 1.1, false),
			}},
			eff:     Effects{Charges: map[string][]string{"k1": {"ch_1", "ch_2", "ch_3"}}},
			promise: AtLeastOnce,
			want:    "doubled=1",
		},
		{
			name: "one more effect after answers that all said nothing ran",
			h: History{Ops: []Op{
				status(1, "k1", 0, 0.1, 503, "StoreUnavailable"),
				ack(2, "k1", "ch_2", 1, 1.1, false),
			}},
			eff:     Effects{Charges: map[string][]string{"k1": {"ch_1", "ch_2"}}},
			promise: AtLeastOnce,
			want:    "doubled=1",
		},
		{
			name: "a changed replay",
			h: History{Ops: []Op{
				ack(1, "k1", "ch_1", 0, 0.1, false),
				ack(2, "k1", "ch_9", 0.5, 0.6, true),
				ack(3, "k1", "ch_1", 1, 1.1, true),
			}},
			eff:  Effects{Charges: one("k1", "ch_1")},
			want: "not-linearizable=1 wrong=1",
		},
		{
			name: "a replay that returned before its answer was written is not linearizable",
			h: History{Ops: []Op{
				ack(1, "k1", "ch_1", 0, 0.1, true),
				ack(2, "k1", "ch_1", 0.5, 0.6, false),
			}},
			eff:  Effects{Charges: one("k1", "ch_1")},
			want: "not-linearizable=1",
		},
		{
			name: "two live answers of one key are not linearizable, even alike",
			h: History{Ops: []Op{
				ack(1, "k1", "ch_1", 0, 0.1, false),
				ack(2, "k1", "ch_1", 0.5, 0.6, false),
			}},
			eff:  Effects{Charges: one("k1", "ch_1")},
			want: "not-linearizable=1",
		},
		{
			name: "a replay after a 'not run' answer and no live one is not linearizable",
			h: History{Ops: []Op{
				status(1, "k1", 0, 0.1, 503, "StoreUnavailable"),
				ack(2, "k1", "ch_1", 0.5, 0.6, true),
			}},
			eff:  Effects{Charges: one("k1", "ch_1")},
			want: "not-linearizable=1",
		},
		{
			name: "concurrent live and replay answers linearize",
			h: History{Ops: []Op{
				ack(1, "k1", "ch_1", 0, 1, false),
				ack(2, "k1", "ch_1", 0.2, 0.5, true),
			}},
			eff: Effects{Charges: one("k1", "ch_1")},
		},
		{
			name: "a 500 is unexpected, and a key that ends without 2xx is unresolved",
			h: History{Ops: []Op{
				status(1, "k1", 0, 0.1, 500, "Internal"),
				status(2, "k1", 1, 1.1, 500, "Internal"),
			}},
			eff:  Effects{Charges: map[string][]string{}},
			want: "unexpected=2 unresolved=1",
		},
		{
			name: "no answer in time from an instance no fault touched is hung",
			h: History{Ops: []Op{
				noAnswer(1, "k1", 0, 5, true),
				ack(2, "k1", "ch_1", 6, 6.1, false),
			}, Faults: []Fault{{Kind: "pg-pause", Target: "postgres", Start: s(0.5), End: s(4)}}},
			eff:  Effects{Charges: one("k1", "ch_1")},
			want: "hung=1",
		},
		{
			name: "no answer in time from a stopped instance is allowed",
			h: History{Ops: []Op{
				noAnswer(1, "k1", 0, 5, true),
				ack(2, "k1", "ch_1", 6, 6.1, false),
			}, Faults: []Fault{{Kind: "sigstop", Target: "a", Disturbs: []string{"a"}, Start: s(0.5), End: s(4)}}},
			eff: Effects{Charges: one("k1", "ch_1")},
		},
		{
			name: "a charge of no key is a phantom",
			h: History{Ops: []Op{
				ack(1, "k1", "ch_1", 0, 0.1, false),
			}},
			eff:  Effects{Charges: one("k1", "ch_1"), Phantom: []string{"ch_7"}},
			want: "phantom=1",
		},
		{
			name: "a refund whose provider call was repeated, deduped by the provider, is right",
			h: History{Ops: []Op{
				refund(noAnswer(1, "r1", 0, 0.5, false)),
				refund(ack(2, "r1", "re_1", 1, 1.1, false)),
			}},
			eff:  Effects{Charges: one("r1", "re_1"), Provider: map[string]ProviderCalls{"r1": {Refunds: 1, Requests: 2}}},
			want: "provider-repeats=1",
		},
		{
			name: "two refunds at the provider for one charge are doubled",
			h: History{Ops: []Op{
				refund(ack(1, "r1", "re_1", 1, 1.1, false)),
			}},
			eff:  Effects{Charges: one("r1", "re_1"), Provider: map[string]ProviderCalls{"r1": {Refunds: 2, Requests: 2}}},
			want: "doubled=1",
		},
		{
			name: "an acknowledged refund the provider never got is lost",
			h: History{Ops: []Op{
				refund(ack(1, "r1", "re_1", 1, 1.1, false)),
			}},
			eff:  Effects{Charges: one("r1", "re_1"), Provider: map[string]ProviderCalls{"r1": {}}},
			want: "lost=1",
		},
		{
			name: "a second refund row is doubled even where charges are at-least-once",
			h: History{Ops: []Op{
				refund(noAnswer(1, "r1", 0, 0.5, false)),
				refund(ack(2, "r1", "re_2", 1, 1.1, false)),
			}},
			eff:     Effects{Charges: map[string][]string{"r1": {"re_1", "re_2"}}},
			promise: AtLeastOnce,
			want:    "doubled=1",
		},
		{
			name: "a 409 that is not IdempotencyInProgress is unexpected",
			h: History{Ops: []Op{
				refund(status(1, "r1", 0, 0.1, 409, "AlreadyRefunded")),
				refund(ack(2, "r1", "re_1", 1, 1.1, false)),
			}},
			eff:  Effects{Charges: one("r1", "re_1")},
			want: "unexpected=1",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Check(tc.h, tc.eff, Options{Driver: "test", Promise: tc.promise, RoutePromise: map[string]Promise{"/refunds": ExactlyOnce}})
			got := counts(r)
			if got != tc.want {
				var b strings.Builder
				r.WriteDetails(&b, 20)
				t.Errorf("counts = %q, want %q\n%s", got, tc.want, b.String())
			}
			if ok := tc.want == "" || tc.want == "extra=1" || tc.want == "provider-repeats=1"; r.OK() != ok {
				t.Errorf("OK() = %v, want %v", r.OK(), ok)
			}
		})
	}
}

// counts is a report's non-zero counts, sorted by name.
func counts(r *Report) string {
	var out []string
	for _, c := range []struct {
		name string
		n    int
	}{
		{"doubled", r.Doubled}, {"extra", r.Extra}, {"hung", r.Hung}, {"lost", r.Lost},
		{"not-linearizable", r.NotLinearizable}, {"provider-repeats", r.ProviderRepeats}, {"unexpected", r.Unexpected},
		{"unresolved", r.Unresolved}, {"wrong", r.WrongAnswers},
	} {
		if c.n != 0 {
			out = append(out, fmt.Sprintf("%s=%d", c.name, c.n))
		}
	}
	for _, v := range r.Violations {
		if v.Kind == "phantom" {
			out = append(out, "phantom=1")
		}
	}
	return strings.Join(out, " ")
}

// TestCheckLargeHistoryIsDecided: a run's history (thousands of keys, each
// with a few concurrent operations) is decided, not left "undecided".
func TestCheckLargeHistoryIsDecided(t *testing.T) {
	var h History
	eff := Effects{Charges: map[string][]string{}}
	seq := 0
	for k := 0; k < 3000; k++ {
		key, id := fmt.Sprintf("k%d", k), fmt.Sprintf("ch_%d", k)
		base := float64(k) * 0.01
		seq++
		h.Ops = append(h.Ops, noAnswer(seq, key, base, base+0.3, false))
		seq++
		h.Ops = append(h.Ops, ack(seq, key, id, base+0.01, base+0.2, false))
		seq++
		h.Ops = append(h.Ops, ack(seq, key, id, base+0.05, base+0.25, true))
		seq++
		h.Ops = append(h.Ops, status(seq, key, base+0.06, base+0.07, 409, "IdempotencyInProgress"))
		eff.Charges[key] = []string{id}
	}
	r := Check(h, eff, Options{Driver: "test"})
	if !r.OK() || r.Acked != 3000 {
		var b strings.Builder
		r.WriteDetails(&b, 5)
		t.Fatalf("acked %d, OK %v\n%s", r.Acked, r.OK(), b.String())
	}
}
