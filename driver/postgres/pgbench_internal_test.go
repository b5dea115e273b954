package postgres

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var updatePgbench = flag.Bool("update-pgbench", false, "rewrite the claim in scripts/pgbench/parts/claim.sql from claimCallSQL")

// pgbenchClaim is the driver's claim (claimCallSQL) as the pgbench scripts
// send it: schema oke, and pgbench variables for the parameters.
func pgbenchClaim() string {
	q := strings.TrimSpace(strings.ReplaceAll(claimCallSQL, "{s}", "oke"))
	for _, r := range []struct{ param, v string }{
		{"$9", "''"}, {"$8", ":ttl"}, {"$7", ":lease"}, {"$6", ":owner"}, {"$5", ":fp"},
		{"$4", ":key"}, {"$3", ":flow"}, {"$2", ":principal"}, {"$1", ":tenant"},
	} {
		q = strings.ReplaceAll(q, r.param, r.v)
	}
	return q + ";"
}

// TestPgbenchScriptsClaimLikeTheDriver: the pgbench scripts that
// docs/BENCHMARKS.md compares oke with send the driver's own claim statement
// (pgbench cannot import it). go test -run PgbenchScripts -update-pgbench
// rewrites them after claimSQL changes.
func TestPgbenchScriptsClaimLikeTheDriver(t *testing.T) {
	files, err := filepath.Glob("../../scripts/pgbench/*.sql")
	parts, _ := filepath.Glob("../../scripts/pgbench/parts/*.sql")
	files = append(files, parts...)
	if err != nil || len(files) == 0 {
		t.Fatalf("no pgbench scripts found (%v)", err)
	}
	want := pgbenchClaim()
	claims := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		start := strings.Index(s, "\nSELECT * FROM oke.oke_claim(")
		if start < 0 {
			continue // a script without a claim
		}
		start++
		end := strings.Index(s[start:], ";")
		if end < 0 {
			t.Fatalf("%s: the claim has no end (;)", f)
		}
		end += start + 1
		claims++
		if strings.Join(strings.Fields(s[start:end]), " ") == strings.Join(strings.Fields(want), " ") {
			continue
		}
		if !*updatePgbench {
			t.Errorf("%s: its claim is not the driver's; run go test -run PgbenchScripts -update-pgbench ./driver/postgres/", f)
			continue
		}
		if err := os.WriteFile(f, []byte(s[:start]+want+s[end:]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if claims == 0 {
		t.Fatal("no pgbench script holds a claim statement (scripts/pgbench/parts/claim.sql)")
	}
}
