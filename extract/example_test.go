package extract_test

import (
	"fmt"

	"github.com/okengine/oke/extract"
)

// A flow that declares itself read-only but calls fx.Raw breaks a rule:
// the diagnostic names the file, the flow, the option and the fix, and
// Write would write nothing.
func Example() {
	res, err := extract.Run(extract.Config{Patterns: []string{"./testdata/rules/effects"}})
	if err != nil {
		fmt.Println(err) // the packages do not load: oke extract exits 2
		return
	}
	for _, d := range res.Diagnostics {
		fmt.Println(d.Rule)
		fmt.Println(d)
	}
	for _, f := range res.Contract.Flows {
		fmt.Println(f.Name, f.Effects, f.Why["raw"])
	}
	// Output:
	// effects
	// extract/testdata/rules/effects/effects.go:19:15: flow "effects.publish": Options.Effects declares [read] but the flow also has raw (extract/testdata/rules/effects/effects.go:21 publish → extract/testdata/rules/effects/effects.go:16 fx.Raw); add oke.EffectRaw to Effects, or drop Effects and let oke extract infer them
	// effects.publish [raw] [extract/testdata/rules/effects/effects.go:21 publish → extract/testdata/rules/effects/effects.go:16 fx.Raw]
}
