package journal

import "context"

// PatchPrefix begins the name of the step that marks a run as taking a
// patch's new code: "oke.patch:" and the patch's name.
const PatchPrefix = "oke.patch:"

// patchNot begins the name an execution remembers (never saved) for a patch
// it decided against, so that a second check in the same execution answers
// the same.
const patchNot = "oke.patch-not:"

// Patch decides whether the run takes patch name's new code, the same way on
// every execution of the run:
//
//   - where the journal already holds the run's steps (a pick-up replaying
//     them), it does so when the step saved at this point is the patch's
//     marker — consumed, as a step — and not otherwise: the run went past
//     this point on the old code;
//   - where the run is past its saved steps (new runs, and old runs that
//     never got this far), it saves the marker and takes the new code —
//     unless deprecated, when it saves nothing and takes the new code (the
//     old code is gone, and no old run is left to need the marker).
//
// A second check of the same patch in one execution answers as the first.
func (x *Exec) Patch(ctx context.Context, name string, deprecated bool) (bool, error) {
	yes, no := PatchPrefix+name, patchNot+name
	x.mu.Lock()
	switch {
	case x.parked:
		x.mu.Unlock()
		return false, ErrParked
	case x.failed != nil:
		err := x.failed
		x.mu.Unlock()
		return false, err
	case x.has(yes):
		x.mu.Unlock()
		return true, nil
	case x.has(no):
		x.mu.Unlock()
		return false, nil
	}
	seq := x.next + 1
	replaying := seq <= len(x.saved)
	marked := replaying && x.saved[seq-1].Name == yes
	if replaying && !marked {
		x.seen(no)
		x.mu.Unlock()
		return deprecated, nil
	}
	if !replaying && deprecated {
		x.seen(yes)
		x.mu.Unlock()
		return true, nil
	}
	x.mu.Unlock()
	if _, _, err := x.Step(ctx, yes, func(context.Context) ([]byte, []byte, error) {
		return []byte("true"), nil, nil
	}); err != nil {
		return false, err
	}
	return true, nil
}

// has reports whether this execution took a step (or remembered a name)
// name, without taking it.
func (x *Exec) has(name string) bool {
	if x.names != nil {
		return x.names[name]
	}
	if x.takenBits&(uint64(1)<<nameHash(name)) == 0 {
		return false
	}
	for _, n := range x.taken {
		if n == name {
			return true
		}
	}
	return false
}
