package driver_test

import (
	"testing"
	"time"

	"github.com/okengine/oke/driver"
)

// TestMayReplace: the replace rule of Claim, row by row (DESIGN.md section
// 3: no row or an expired one runs; a lapsed claim of the same request is
// taken over; anything else stops the claim).
func TestMayReplace(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	past, future := now.Add(-time.Second), now.Add(time.Second)
	for _, tc := range []struct {
		name              string
		row               driver.Row
		fp                string
		replace, takeover bool
	}{
		{"completed, TTL not passed", driver.Row{State: driver.Completed, Fingerprint: "a", ExpiresAt: future}, "a", false, false},
		{"completed, TTL passed", driver.Row{State: driver.Completed, Fingerprint: "a", ExpiresAt: past}, "b", true, false},
		{"completed at its expiry instant", driver.Row{State: driver.Completed, Fingerprint: "a", ExpiresAt: now}, "a", true, false},
		{"running, lease live", driver.Row{State: driver.Running, Fingerprint: "a", LeaseUntil: future, ExpiresAt: future}, "a", false, false},
		{"running, lease live, TTL passed", driver.Row{State: driver.Running, Fingerprint: "a", LeaseUntil: future, ExpiresAt: past}, "a", false, false},
		{"lapsed, same request", driver.Row{State: driver.Running, Fingerprint: "a", LeaseUntil: past, ExpiresAt: future}, "a", true, true},
		{"lapsed, another request", driver.Row{State: driver.Running, Fingerprint: "a", LeaseUntil: past, ExpiresAt: future}, "b", false, false},
		{"lapsed and expired counts as expired", driver.Row{State: driver.Running, Fingerprint: "a", LeaseUntil: past, ExpiresAt: past}, "a", true, false},
	} {
		replace, takeover := driver.MayReplace(&tc.row, tc.fp, now)
		if replace != tc.replace || takeover != tc.takeover {
			t.Errorf("%s: MayReplace = %v, %v; want %v, %v", tc.name, replace, takeover, tc.replace, tc.takeover)
		}
	}
}

// TestClaimedRowKeepsTheRunOnATakeover: a takeover resumes the old row's run;
// a replacement of an expired row starts afresh with the request's.
func TestClaimedRowKeepsTheRunOnATakeover(t *testing.T) {
	now := time.Now()
	req := driver.ClaimRequest{Fingerprint: "a", Owner: "o2", Lease: time.Second, TTL: time.Hour, RunID: "run_new"}
	old := &driver.Row{RunID: "run_old"}
	if r := driver.ClaimedRow(req, old, true, now); r.RunID != "run_old" || r.Owner != "o2" || r.State != driver.Running || !r.LeaseUntil.Equal(now.Add(time.Second)) || !r.ExpiresAt.Equal(now.Add(time.Hour)) {
		t.Fatalf("takeover: %+v", r)
	}
	if r := driver.ClaimedRow(req, old, false, now); r.RunID != "run_new" {
		t.Fatalf("replacement: %+v", r)
	}
	if r := driver.ClaimedRow(req, nil, false, now); r.RunID != "run_new" {
		t.Fatalf("new row: %+v", r)
	}
}
