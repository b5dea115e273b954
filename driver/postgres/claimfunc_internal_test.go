package postgres

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

// claimFunctionHash is the SHA-256 of claimFunctionSQL() as migration 016
// (016_claim_function_trace.sql) applied it. (Migration 004 applied
// 93c19aa1…, oke_claim, before resp_trace.)
const claimFunctionHash = "0515727a9be17517efc89c527be9073439b3867c2e6e9aabe1a404bb3b3c30da"

// TestClaimFunctionIsClaimSQL: a schema gets the claim function once, from
// the migration that creates it, so the function must not change under a
// migration already applied. When claimSQL (or the function around it)
// changes, this fails: add a migration that replaces the function with the
// new text (CREATE OR REPLACE, generated from claimSQL; under a new name,
// claimFunction, when the columns it returns change: see claimfunc.go), and
// update the hash to it.
func TestClaimFunctionIsClaimSQL(t *testing.T) {
	q := claimFunctionSQL()
	sum := sha256.Sum256([]byte(q))
	if got := hex.EncodeToString(sum[:]); got != claimFunctionHash {
		t.Errorf("the claim function changed (sha256 %s, the latest claim migration applied %s): schemas migrated before keep the old one; add a migration that replaces it, then update claimFunctionHash", got, claimFunctionHash)
	}
	if len(claimedCols) != claimedDests || len(rowTypes) != rowDests || len(strings.Split(rowCols, ",")) != rowDests {
		t.Errorf("claimedCols %d (claimedDests %d), rowTypes %d, rowCols %d (rowDests %d)",
			len(claimedCols), claimedDests, len(rowTypes), len(strings.Split(rowCols, ",")), rowDests)
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
