package extract_test

import "testing"

// TestTheRepositoryBreaksNoRule: oke extract on this repository itself
// (./..., its tests' flows included) breaks no rule, as README and
// docs/extract.md tell a user to run it. Two test flows of driver/drivertest
// once shared a name, which an app refuses.
func TestTheRepositoryBreaksNoRule(t *testing.T) {
	res := runIn(t, "..", "./...")
	for _, d := range res.Diagnostics {
		t.Errorf("%v", d)
	}
	if len(res.Contract.Flows) == 0 {
		t.Fatal("no flows found in the repository")
	}
}
