package secretflag

import (
	"bytes"
	"flag"
	"strings"
	"testing"
)

// TestSecretNeverShows: the value a secret flag starts with (from the
// environment) is used but never printed by -h; -name=v replaces it.
func TestSecretNeverShows(t *testing.T) {
	for _, args := range [][]string{nil, {"-token", "given-on-the-command-line"}, {"-token", ""}} {
		token := "from-the-environment-s3cr3t"
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		var out bytes.Buffer
		fs.SetOutput(&out)
		Var(fs, &token, "token", "the admin `token`")
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		want := "from-the-environment-s3cr3t"
		if len(args) == 2 {
			want = args[1]
		}
		if token != want {
			t.Errorf("%q: token %q, want %q", args, token, want)
		}
		fs.PrintDefaults()
		if strings.Contains(out.String(), "s3cr3t") || !strings.Contains(out.String(), "-token token") {
			t.Errorf("%q: -h shows:\n%s", args, out.String())
		}
	}
}
