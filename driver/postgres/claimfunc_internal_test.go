package postgres

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

// claimFunctionHash is the SHA-256 of claimFunctionSQL() as migration 004
// applied it.
const claimFunctionHash = "93c19aa1eb064f2a6cf61f9abb2cd1bccd849a4bb1569179975fc9b257dac3a7"

// TestClaimFunctionIsClaimSQL: a schema gets oke_claim once, from the
// migration that creates it, so the function must not change under a
// migration already applied. When claimSQL (or the function around it)
// changes, this fails: add a migration that replaces the function with the
// new text (CREATE OR REPLACE, generated from claimSQL), and update the hash
// to it.
func TestClaimFunctionIsClaimSQL(t *testing.T) {
	q := claimFunctionSQL()
	sum := sha256.Sum256([]byte(q))
	if got := hex.EncodeToString(sum[:]); got != claimFunctionHash {
		t.Errorf("the claim function changed (sha256 %s, migration 004 applied %s): schemas migrated before keep the old one; add a migration that replaces it, then update claimFunctionHash", got, claimFunctionHash)
	}
	// Its second branch is claimSQL, parameters named.
	body := claimSQL
	for i := len(claimParams); i >= 1; i-- {
		body = strings.ReplaceAll(body, "$"+string(rune('0'+i)), claimParams[i-1].name)
	}
	if !strings.Contains(q, "RETURN QUERY"+body+";") || strings.Contains(q, "$1") {
		t.Error("the claim function does not run claimSQL with its parameters named")
	}
}
