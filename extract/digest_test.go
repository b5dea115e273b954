package extract_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/okengine/oke/extract"
)

// A flow's digest covers the code reachable from its function — helpers
// any levels deep, method values, the bodies given to oke.Step, the flows
// it calls with oke.Call or oke.Run — and nothing else: each row changes
// one place of the fixture (through an overlay) and names the flows whose
// digest must change; every other flow's must not. Comments and
// formatting change none.
func TestDigestFollowsTheCode(t *testing.T) {
	base := runIn(t, "", "./testdata/flows")
	name, err := filepath.Abs("testdata/flows/flows.go")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		old, new string
		changed  []string
	}{
		{"a helper three calls deep", "INSERT INTO items (name) VALUES ($1)", "INSERT INTO items (title) VALUES ($1)", []string{"fixture.deep"}},
		// fixture.hooked calls a function value (hook) of notify's
		// signature that extract cannot resolve: every function of that
		// signature used as a value may be it (the over-approximation).
		{"a method called through a method value", `To: n.to})`, `To: "<" + n.to + ">"})`, []string{"fixture.hooked", "fixture.methodValue"}},
		{"a closure the flow calls", `return fx.Emit(ctx, name, in)`, `return fx.Emit(ctx, name+".v2", in)`, []string{"fixture.closure"}},
		{"a step's body", `"http://provider/"+id`, `"https://provider/"+id`, []string{"fixture.stepped"}},
		{"a flow called with oke.Call and oke.Run", "UPDATE items SET n = n + 1", "UPDATE items SET n = n + 2", []string{"fixture.callee", "fixture.caller", "fixture.misc"}},
		{"a helper without fx", `"run " + string(rune('a'+i))`, `"step " + string(rune('a'+i))`, []string{"fixture.misc"}},
		{"comments and formatting only", "func levelTwo(ctx context.Context, st *oke.Store) error {\n\treturn levelThree(ctx, st, \"t\")\n}",
			"// levelTwo: a comment.\n\n\nfunc levelTwo(\n\tctx context.Context,\n\tst *oke.Store,\n) error {\n\t// another\n\treturn levelThree(ctx, st,\n\t\t\"t\",\n\t)\n}", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(string(src), tc.old) {
				t.Fatalf("the fixture has no %q", tc.old)
			}
			changed := strings.Replace(string(src), tc.old, tc.new, 1)
			res, err := extract.Run(extract.Config{Patterns: []string{"./testdata/flows"}, Overlay: map[string][]byte{name: []byte(changed)}})
			if err != nil {
				t.Fatal(err)
			}
			was := map[string]string{}
			for _, f := range base.Contract.Flows {
				was[f.Name] = f.Digest
			}
			var got []string
			for _, f := range res.Contract.Flows {
				if f.Digest != was[f.Name] {
					got = append(got, f.Name)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.changed) {
				t.Errorf("the digests of %q changed, want those of %q", got, tc.changed)
			}
		})
	}
}
