package extract_test

import (
	"testing"
)

// TestCronBindings: a Cron binding is recorded as kind "schedule" whatever
// its spec (configuration, not contract) and through its options (In,
// CatchUp); it never honors the header, and nothing is warned.
func TestCronBindings(t *testing.T) {
	res := runIn(t, "", "./testdata/schedules")
	if len(res.Diagnostics) != 0 || len(res.Warnings) != 0 {
		t.Fatalf("diagnostics %v, warnings %v", res.Diagnostics, res.Warnings)
	}
	if len(res.Contract.Flows) != 1 {
		t.Fatalf("flows %+v", res.Contract.Flows)
	}
	f := res.Contract.Flows[0]
	if f.Name != "sched.nightly" || len(f.Bindings) != 1 {
		t.Fatalf("flow %s bindings %+v, want one schedule binding (both Handle calls make the same)", f.Name, f.Bindings)
	}
	if b := f.Bindings[0]; b.Kind != "schedule" || b.Honored || b.Method != "" || b.Path != "" {
		t.Fatalf("binding %+v", b)
	}
}
