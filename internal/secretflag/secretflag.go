// Package secretflag is a string flag for secrets — a token, a DSN that
// may hold a password — whose value never shows in -h: the flag package
// prints a flag's default from its Value's String, and this one's is
// always empty. Its value starts as whatever the caller put there (e.g.
// an environment variable's), and -name=v replaces it.
package secretflag

import "flag"

type value struct{ p *string }

func (v value) String() string     { return "" }
func (v value) Set(s string) error { *v.p = s; return nil }

// Var defines the secret flag name on fs (a *flag.FlagSet), stored in *p;
// usage is as for flag.StringVar (a `word` in backquotes names the value).
func Var(fs interface {
	Var(v flag.Value, name, usage string)
}, p *string, name, usage string) {
	fs.Var(value{p}, name, usage)
}
