package oke

import (
	"context"
	"fmt"
)

// Patched lets a durable flow change while runs of it are in flight. Put the
// new code behind it, the old code in the else branch:
//
//	ok, err := oke.Patched(ctx, "fraud-check")
//	if err != nil {
//		return oke.Response[Receipt]{}, err
//	}
//	if ok {
//		// new runs (and runs that had not got this far): the new step
//		_, err = oke.Step(ctx, "fraud check", checkFraud)
//	} else {
//		// runs that went past this point on the old code
//		_, err = oke.Step(ctx, "charge", charge)
//	}
//
// It reports true for a run that reaches this point on the new code — it
// saves a marker step there ("oke.patch:fraud-check"), so that every later
// pick-up of the run answers true again — and false for a run whose journal
// shows it went past this point before the patch existed: replaying its
// saved steps, it keeps to the old branch and matches its journal, where
// without a patch it would stop with a StepMismatchError. Each run decides
// once; a second check of the same name in a run answers the same.
//
// Retire a patch in two deploys, once no run older than it is unfinished
// (oke runs ls -flow F -status running,sleeping):
//
//  1. replace Patched with DeprecatePatch and drop the else branch: runs
//     that saved the marker still match their journal, new runs save none;
//  2. once no run that saved the marker is unfinished, remove the call.
//
// A name is the patch's, unique in the flow; oke extract lists a flow's
// patches in the contract. Outside a durable run Patched reports true (there
// is no old run to keep).
//
// The marker is a step of its own (one save); it is the run's first unsaved
// step when the patch point is, and then counts that step's earlier
// attempts.
func Patched(ctx context.Context, name string) (bool, error) {
	st := runFrom(ctx)
	if st == nil {
		return true, nil
	}
	ok, err := st.x.Patch(ctx, name, false)
	if err != nil {
		return false, fmt.Errorf("patch %q: %w", name, err)
	}
	return ok, nil
}

// DeprecatePatch is the first step of retiring patch name (see Patched):
// where Patched stood, it consumes the marker of a run that saved one, and
// saves none for new runs. Remove it once no run that saved the marker is
// unfinished.
func DeprecatePatch(ctx context.Context, name string) error {
	st := runFrom(ctx)
	if st == nil {
		return nil
	}
	if _, err := st.x.Patch(ctx, name, true); err != nil {
		return fmt.Errorf("patch %q: %w", name, err)
	}
	return nil
}
