package vet_test

import (
	"testing"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/okengine/oke/vet"
)

// TestRules runs each rule's analyzer on its fixture package under
// testdata/src, whose // want comments are the diagnostics it must report
// (and no others), and on package nondurable: flows that are not durable
// may do everything the rules report in a durable one, and nothing there is
// reported. (One run per analyzer: each loads the packages anew.)
func TestRules(t *testing.T) {
	for _, tc := range []struct {
		a   *analysis.Analyzer
		pkg string
	}{
		{vet.EffectOutsideStep, "effects"},
		{vet.NondetOutsideStep, "nondet"},
		{vet.NondetStepName, "stepnames"},
		{vet.FxGoroutine, "goroutines"},
		{vet.NondetReach, "reach"},
		{vet.NondetReach, "mainpkg"},
		{vet.RawIO, "rawio"},
		{vet.SelectChoice, "selects"},
		{vet.MapOrder, "maporder"},
		{vet.IgnoreReason, "ignore"},
	} {
		t.Run(tc.a.Name, func(t *testing.T) {
			analysistest.Run(t, analysistest.TestData(), tc.a, tc.pkg, "nondurable")
		})
	}
}
