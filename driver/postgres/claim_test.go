package postgres_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/okengine/oke/driver"
)

// TestClaimRaceOnNewKeyReportsTheWinner drives the one path of Claim that
// needs a second read: a claimer whose snapshot predates a concurrent
// claimer's insert of the same new key. Round after round, exactly one of
// the racers claims, and every other one reports the winner's row.
func TestClaimRaceOnNewKeyReportsTheWinner(t *testing.T) {
	d := newDriver(t)
	defer d.Close()
	const racers, rounds = 8, 100
	for round := range rounds {
		key := driver.Key{Tenant: "acme", Principal: "user:42", Flow: "payments.charge",
			Key: fmt.Sprintf("idem-key-0000-race-%d", round)}
		res := make([]driver.ClaimResult, racers)
		var wg sync.WaitGroup
		for i := range racers {
			wg.Go(func() {
				r, err := d.Claim(t.Context(), driver.ClaimRequest{Key: key, Fingerprint: "fp",
					Owner: fmt.Sprintf("owner-%d", i), Lease: time.Minute, TTL: time.Hour})
				if err != nil {
					t.Errorf("round %d: Claim by owner-%d: %v", round, i, err)
				}
				res[i] = r
			})
		}
		wg.Wait()
		winner := ""
		for i, r := range res {
			if r.Claimed {
				if winner != "" {
					t.Fatalf("round %d: owner-%d and %s both claimed", round, i, winner)
				}
				winner = r.Row.Owner
			}
		}
		if winner == "" {
			t.Fatalf("round %d: nobody claimed the new key", round)
		}
		for i, r := range res {
			if r.Row.Owner != winner || r.Row.State != driver.Running || r.Row.Key != key || r.Now.IsZero() {
				t.Fatalf("round %d: owner-%d sees row {Owner %q, State %v, Key %v, Now %v}, want the winner %q's running row",
					round, i, r.Row.Owner, r.Row.State, r.Row.Key, r.Now, winner)
			}
		}
	}
}
