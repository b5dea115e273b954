package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
)

func runVersion(_ context.Context, name string, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	js := fs.Bool("json", false, "print the versions as JSON")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: %s [-json]

Prints one line: the version of oke, the VCS revision it was built from
(+dirty when the checkout had changes) and the Go toolchain that built it:

  oke v0.3.0 (rev 1d120a6, go1.26.8)
  oke devel (rev 1d120a6+dirty, go1.26.8)
`, name)
	}
	if err := fs.Parse(args); err != nil {
		return parseExit(err)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n", name, fs.Arg(0))
		return 2
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	v := buildVersion(bi, Version)
	if *js {
		b, _ := json.Marshal(map[string]any{"oke": v.Version, "revision": v.Revision, "dirty": v.Dirty,
			"go": v.Go, "os": runtime.GOOS, "arch": runtime.GOARCH})
		fmt.Fprintf(stdout, "%s\n", b)
		return 0
	}
	fmt.Fprintln(stdout, v.Line())
	return 0
}

// buildInfo is what oke version prints.
type buildInfo struct {
	// Version is the module's version (a release: v0.3.0), or "devel" for
	// a build from a checkout (go build stamps a pseudo-version such as
	// v0.0.0-20261201094933-1d120a6f0e2b; its revision is Revision).
	Version string
	// Revision is the VCS revision, short (7 hex digits), when the build
	// knows it; Dirty says the checkout had changes.
	Revision string
	Dirty    bool
	Go       string // the toolchain: go1.26.8
}

// Line is the one line oke version prints: "oke v0.3.0 (rev 1d120a6,
// go1.26.8)", "oke devel (rev 1d120a6+dirty, go1.26.8)", "oke devel
// (go1.26.8)".
func (b buildInfo) Line() string {
	var parts []string
	if b.Revision != "" {
		rev := "rev " + b.Revision
		if b.Dirty {
			rev += "+dirty"
		}
		parts = append(parts, rev)
	}
	parts = append(parts, b.Go)
	return "oke " + b.Version + " (" + strings.Join(parts, ", ") + ")"
}

// pseudoVersion matches a Go pseudo-version's tail — its time and
// revision, and the +dirty go build adds for a modified checkout — in the
// three forms (vX.0.0-T-R, vX.Y.Z-0.T-R, vX.Y.Z-pre.0.T-R).
var pseudoVersion = regexp.MustCompile(`^v\d+\.\d+\.\d+-(?:[0-9A-Za-z.-]*\.)?\d{14}-([0-9a-f]{12})(\+dirty)?$`)

// buildVersion reads a binary's build info (nil: none): the main module's
// version, unless override (Version, set at link time) is given; the VCS
// revision, from the vcs settings, else from a pseudo-version; and the Go
// version.
func buildVersion(bi *debug.BuildInfo, override string) buildInfo {
	b := buildInfo{Version: "devel", Go: runtime.Version()}
	if bi != nil {
		if bi.GoVersion != "" {
			b.Go = bi.GoVersion
		}
		v := bi.Main.Version
		if m := pseudoVersion.FindStringSubmatch(v); m != nil {
			b.Revision, b.Dirty = m[1], m[2] != ""
		} else if v != "" && v != "(devel)" {
			// A release, or a checkout at a tag: v0.3.0, v0.3.0+dirty.
			b.Version = strings.TrimSuffix(v, "+dirty")
			b.Dirty = v != b.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Revision = s.Value
			case "vcs.modified":
				b.Dirty = s.Value == "true"
			}
		}
	}
	if len(b.Revision) > 7 {
		b.Revision = b.Revision[:7]
	}
	if override != "" {
		b.Version = override
	}
	return b
}
