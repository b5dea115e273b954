package vet_test

import (
	"testing"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/okengine/oke/vet"
)

// TestRules runs each rule's analyzer on its fixture package under
// testdata/src, whose // want comments are the diagnostics it must report
// (and no others).
func TestRules(t *testing.T) {
	for _, tc := range []struct {
		a   *analysis.Analyzer
		pkg string
	}{
		{vet.EffectOutsideStep, "effects"},
		{vet.NondetOutsideStep, "nondet"},
		{vet.NondetStepName, "stepnames"},
		{vet.FxGoroutine, "goroutines"},
		{vet.IgnoreReason, "ignore"},
	} {
		t.Run(tc.a.Name, func(t *testing.T) {
			analysistest.Run(t, analysistest.TestData(), tc.a, tc.pkg)
		})
	}
}

// TestNotDurable: a flow that is not durable may do everything the rules
// report in a durable one.
func TestNotDurable(t *testing.T) {
	for _, a := range vet.Analyzers {
		t.Run(a.Name, func(t *testing.T) {
			analysistest.Run(t, analysistest.TestData(), a, "nondurable")
		})
	}
}
