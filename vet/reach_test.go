package vet

import (
	"path/filepath"
	"testing"
)

// TestOutsideModules: facts are recorded for the build's own code only —
// not for GOROOT, the module cache (also one set with go env -w, found by
// its path@version directories) or vendored code.
func TestOutsideModules(t *testing.T) {
	for _, tc := range []struct {
		file string
		want bool
	}{
		{filepath.Join(goroot, "src", "time", "time.go"), true},
		{filepath.Join(modcache, "github.com", "google", "uuid@v1.6.0", "uuid.go"), true},
		{filepath.FromSlash("/elsewhere/pkg/mod/github.com/jackc/pgx/v5@v5.12.0/conn.go"), true},
		{filepath.FromSlash("/src/app/vendor/github.com/google/uuid/uuid.go"), true},
		{filepath.FromSlash("/src/app/billing/billing.go"), false},
		{filepath.FromSlash("/src/app/pkg/mod/notacache.go"), false},
	} {
		if got := OutsideModules(tc.file); got != tc.want {
			t.Errorf("OutsideModules(%q) = %v, want %v", tc.file, got, tc.want)
		}
	}
}
