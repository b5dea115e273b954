package nemesis

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// A Violation is one broken promise, with the operations that show it.
type Violation struct {
	Kind    string // lost, wrong-answer, doubled, phantom, unexpected, unresolved, hung, not-linearizable
	Key     string
	Detail  string
	Excerpt []Op // the key's operations (or the one op), in call order
}

// Report is what Check found in a run.
type Report struct {
	Driver   string
	Promise  Promise
	Faults   int
	ByKind   map[string]int // faults per kind
	Requests int
	Keys     int
	Acked    int // keys answered 2xx at least once

	Lost            int // acked keys whose charge is gone or whose answer changed for good
	WrongAnswers    int // 2xx answers that differ from the key's first
	Doubled         int // keys with more charges than the promise allows
	Extra           int // keys with the one more charge at-least-once allows
	ProviderRepeats int // refund provider requests past the first per refund: at-least-once calls the provider deduped
	Unexpected      int // answers no fault excuses (500, 4xx other than 409)
	Unresolved      int // keys without a 2xx at the end
	Hung            int // no answer in time from an instance that was up
	NotLinearizable int // keys whose register history is not linearizable

	HungDuring map[string]int // hangs by the fault they happened during ("no fault" when none)
	Statuses   map[string]int // answers by status (and error code), "none" for no answer
	Violations []Violation
}

// OK reports whether the run broke no promise (and failed no fault).
func (r *Report) OK() bool {
	return r.Lost+r.WrongAnswers+r.Doubled+r.Unexpected+r.Unresolved+r.Hung+r.NotLinearizable == 0 &&
		len(r.Violations) == 0
}

// Options tune Check.
type Options struct {
	Driver  string
	Promise Promise
	// RoutePromise overrides Promise for the keys of a route, e.g.
	// "/refunds": ExactlyOnce (the refund row is deduped by its drawn id
	// and one refund per charge, on every driver).
	RoutePromise map[string]Promise
	// LinearizabilityTimeout bounds porcupine per key (default 10s).
	LinearizabilityTimeout time.Duration
}

// Check checks a run's history against the final effects. It is a pure
// function: the same history and effects give the same report.
func Check(h History, eff Effects, opt Options) *Report {
	if opt.LinearizabilityTimeout <= 0 {
		opt.LinearizabilityTimeout = 10 * time.Second
	}
	r := &Report{Driver: opt.Driver, Promise: opt.Promise, Faults: len(h.Faults), ByKind: map[string]int{},
		Requests: len(h.Ops), Statuses: map[string]int{}, HungDuring: map[string]int{}}
	for _, f := range h.Faults {
		r.ByKind[f.Kind]++
		if f.Failed != "" {
			r.Violations = append(r.Violations, Violation{Kind: "fault-failed", Detail: fmt.Sprintf("%s on %s at %.3fs: %s", f.Kind, f.Target, f.Start.Seconds(), f.Failed)})
		}
	}

	ops := append([]Op(nil), h.Ops...)
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].Call < ops[j].Call })
	byKey := map[string][]Op{}
	var keys []string
	for _, o := range ops {
		if _, ok := byKey[o.Key]; !ok {
			keys = append(keys, o.Key)
		}
		byKey[o.Key] = append(byKey[o.Key], o)
		switch {
		case o.Status == 0:
			r.Statuses["none"]++
		case o.Code != "":
			r.Statuses[fmt.Sprintf("%d %s", o.Status, o.Code)]++
		default:
			r.Statuses[fmt.Sprint(o.Status)]++
		}
	}
	r.Keys = len(keys)
	add := func(kind, key, detail string, ex []Op) {
		if len(ex) > 12 {
			ex = append(append([]Op(nil), ex[:6]...), ex[len(ex)-6:]...)
		}
		r.Violations = append(r.Violations, Violation{Kind: kind, Key: key, Detail: detail, Excerpt: ex})
	}

	for _, key := range keys {
		kops := byKey[key]
		var first *Op
		mayHaveRun := false
		wrong := 0
		for i := range kops {
			o := &kops[i]
			if !o.Expected() {
				r.Unexpected++
				add("unexpected", key, fmt.Sprintf("answer %d %s is none of 2xx, 409, 503", o.Status, o.Code), []Op{*o})
			}
			if o.MayHaveRun() {
				mayHaveRun = true
			}
			if !o.Acked() {
				continue
			}
			if first == nil {
				first = o
				continue
			}
			if o.answer() != first.answer() {
				wrong++
			}
		}
		if wrong > 0 {
			r.WrongAnswers += wrong
			add("wrong-answer", key, fmt.Sprintf("%d answer(s) differ from the first acknowledged one (%d %s)", wrong, first.Status, first.RespBody), kops)
		}
		// The key's final answer: its last attempt of the settle phase
		// (which retries until a 2xx), else its last 2xx.
		promise := opt.Promise
		if p, ok := opt.RoutePromise[kops[0].Route]; ok {
			promise = p
		}
		last := kops[len(kops)-1]
		for i := len(kops) - 1; i >= 0; i-- {
			if kops[i].Phase == PhaseSettle || (first != nil && kops[i].Acked()) {
				last = kops[i]
				break
			}
		}
		if first == nil {
			r.Unresolved++
			add("unresolved", key, fmt.Sprintf("no 2xx answer in %d attempts; last: %s", len(kops), last.String()), kops)
		} else {
			r.Acked++
			charges := eff.Charges[key]
			id := first.AnswerID()
			found := false
			for _, c := range charges {
				found = found || c == id
			}
			switch {
			case !found:
				r.Lost++
				add("lost", key, fmt.Sprintf("acknowledged %s %q is not in the store (the store holds %v)", kops[0].Route, id, charges), kops)
			case !last.Acked() || last.answer() != first.answer():
				r.Lost++
				add("lost", key, fmt.Sprintf("acknowledged answer is not what the key answers at the end: %s", last.String()), kops)
			}
		}
		allowed := 1
		if promise == AtLeastOnce && mayHaveRun {
			allowed = 2
		}
		switch n := len(eff.Charges[key]); {
		case n > allowed:
			r.Doubled++
			add("doubled", key, fmt.Sprintf("%d rows %v, %s allows %d (an attempt that may have run: %v)", n, eff.Charges[key], promise, allowed, mayHaveRun), kops)
		case n == 2:
			r.Extra++
		}
		if pc, ok := eff.Provider[key]; ok {
			// The provider dedupes on the step's key: one refund per
			// charge however often the step called it.
			switch {
			case pc.Refunds > 1:
				r.Doubled++
				add("doubled", key, fmt.Sprintf("the provider holds %d refunds for the charge (one key per refund step: it must hold one)", pc.Refunds), kops)
			case first != nil && pc.Refunds == 0:
				r.Lost++
				add("lost", key, "acknowledged refund has no refund at the provider", kops)
			}
			if pc.Requests > pc.Refunds {
				r.ProviderRepeats += pc.Requests - pc.Refunds
			}
		}
	}
	if len(eff.Phantom) > 0 {
		add("phantom", "", fmt.Sprintf("%d charges belong to no key sent: %v", len(eff.Phantom), head(eff.Phantom, 10)), nil)
	}

	// Hung: no answer within the client's timeout from an instance that no
	// fault disturbed while the request was out.
	for _, o := range ops {
		if !o.Timeout {
			continue
		}
		disturbed := false
		for _, f := range h.Faults {
			if f.Start <= o.Return && f.End >= o.Call && contains(f.Disturbs, o.Target) {
				disturbed = true
				break
			}
		}
		if !disturbed {
			r.Hung++
			fault := "no fault"
			for _, f := range h.Faults {
				if f.Start <= o.Return && f.End >= o.Call {
					fault = f.Kind + " on " + f.Target
				}
			}
			r.HungDuring[fault]++
			if r.Hung <= 20 { // the count says the rest
				add("hung", o.Key, fmt.Sprintf("no answer within the client's timeout from instance %s, which was up (during: %s)", o.Target, fault), []Op{o})
			}
		}
	}

	for key, why := range checkLinearizable(ops, opt.LinearizabilityTimeout) {
		r.NotLinearizable++
		add("not-linearizable", key, why, byKey[key])
	}
	sort.SliceStable(r.Violations, func(i, j int) bool { return r.Violations[i].Kind < r.Violations[j].Kind })
	return r
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func head(xs []string, n int) []string {
	if len(xs) > n {
		return xs[:n]
	}
	return xs
}

// WriteTable prints reports as the table of docs/RELIABILITY.md.
func WriteTable(w io.Writer, reports ...*Report) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "driver\tfaults\trequests\tkeys\tacked\tlost\tdoubled\twrong answers\tunexpected\tunresolved\thung\tnot linearizable\textra (allowed)\tprovider repeats (allowed)\t")
	for _, r := range reports {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", r.Driver, r.Faults, r.Requests, r.Keys, r.Acked,
			r.Lost, r.Doubled, r.WrongAnswers, r.Unexpected, r.Unresolved, r.Hung, r.NotLinearizable, r.Extra, r.ProviderRepeats)
	}
	tw.Flush()
}

// WriteDetails prints a report's faults by kind, answers by status, and
// every violation with its history excerpt (at most max of them).
func (r *Report) WriteDetails(w io.Writer, max int) {
	fmt.Fprintf(w, "%s (%s): faults", r.Driver, r.Promise)
	for _, k := range sortedKeys(r.ByKind) {
		fmt.Fprintf(w, " %s=%d", k, r.ByKind[k])
	}
	fmt.Fprint(w, "; answers")
	for _, k := range sortedKeys(r.Statuses) {
		fmt.Fprintf(w, " [%s]=%d", k, r.Statuses[k])
	}
	fmt.Fprintln(w)
	if r.Hung > 0 {
		fmt.Fprintf(w, "%s: %d requests hung, during:", r.Driver, r.Hung)
		for _, k := range sortedKeys(r.HungDuring) {
			fmt.Fprintf(w, " [%s]=%d", k, r.HungDuring[k])
		}
		fmt.Fprintln(w)
	}
	for i, v := range r.Violations {
		if i == max {
			fmt.Fprintf(w, "… and %d more violations\n", len(r.Violations)-max)
			break
		}
		fmt.Fprintf(w, "VIOLATION %s key=%s: %s\n", v.Kind, v.Key, v.Detail)
		for _, o := range v.Excerpt {
			fmt.Fprintf(w, "    %s\n", strings.ReplaceAll(o.String(), "\n", " "))
		}
	}
}

func sortedKeys(m map[string]int) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
