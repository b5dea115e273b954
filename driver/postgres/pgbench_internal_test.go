package postgres

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var updatePgbench = flag.Bool("update-pgbench", false, "rewrite scripts/pgbench/parts/claim.sql and held.sql from the driver's SQL")

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
// (pgbench cannot import it). go test ./driver/postgres/ -run PgbenchScripts
// -update-pgbench rewrites them after claimSQL changes.
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
		start := strings.Index(s, "\nSELECT * FROM oke.oke_claim") // oke_claim( or a later version's name
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
			t.Errorf("%s: its claim is not the driver's; run go test ./driver/postgres/ -run PgbenchScripts -update-pgbench", f)
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

// pgbenchHeld is scripts/pgbench/parts/held.sql: the statements the driver
// sends ahead of the BEGIN for a claim held in the transaction (sendHeld),
// as pgbench sends them. The lock key is the key itself there (pgbench
// cannot hash as lockKey does), the request's its negation.
func pgbenchHeld() string {
	var b strings.Builder
	b.WriteString(`-- The driver's claim held in the transaction (heldLockSQL, heldLookupSQL and
-- heldGuardSQL in driver/postgres/heldclaim.go) with pgbench variables for
-- their parameters; the key's lock is :key itself, the request's -:key. Written by
-- TestPgbenchHeldScriptIsTheDrivers; go test ./driver/postgres/ -run PgbenchHeld
-- -update-pgbench rewrites it.
`)
	for _, q := range []string{heldLockSQL, heldLookupSQL, heldGuardSQL} {
		q = strings.ReplaceAll(q, "{s}", "oke")
		subs := []struct{ param, v string }{
			{"$6", "30000"}, {"$5", ":fp"}, {"$4", ":key"}, {"$3", ":flow"}, {"$2", ":principal"}, {"$1", ":tenant"},
		}
		if q == strings.ReplaceAll(heldLockSQL, "{s}", "oke") {
			subs = []struct{ param, v string }{
				{"$2", "(-(:key)::bigint)"}, {"$1", ":key"},
			}
		}
		for _, r := range subs {
			q = strings.ReplaceAll(q, r.param, r.v)
		}
		b.WriteString(q + ";\n")
	}
	return b.String()
}

// TestPgbenchHeldScriptIsTheDrivers: pgbench-held (charge_held.sql) sends
// the driver's own statements for a held claim.
func TestPgbenchHeldScriptIsTheDrivers(t *testing.T) {
	const f = "../../scripts/pgbench/parts/held.sql"
	want := pgbenchHeld()
	b, err := os.ReadFile(f)
	if err == nil && string(b) == want {
		return
	}
	if !*updatePgbench {
		t.Fatalf("%s is not the driver's held claim (%v); run go test ./driver/postgres/ -run PgbenchHeld -update-pgbench", f, err)
	}
	if err := os.WriteFile(f, []byte(want), 0o644); err != nil {
		t.Fatal(err)
	}
}
