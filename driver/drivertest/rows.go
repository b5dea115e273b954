package drivertest

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/okengine/oke/driver"
)

// Durations the rules use. Only the "has ended" direction is ever timed with
// short durations; anything that must still hold uses hold or longer.
const (
	short = 20 * time.Millisecond // a lease or TTL meant to end during the test
	after = 60 * time.Millisecond // sleep this long and short has surely ended
	hold  = time.Minute           // a lease meant to outlive the test
	day   = 24 * time.Hour        // a TTL meant to outlive the test

	// slack is how far two readings of the same instant may differ: stores
	// such as Postgres keep microseconds, not nanoseconds.
	slack = time.Millisecond
	// skew bounds how far the store's clock may be from the test's.
	skew = 5 * time.Minute
)

// Fingerprints of two different requests.
var (
	fpA = strings.Repeat("a1", 32)
	fpB = strings.Repeat("b2", 32)
)

type rowRule struct {
	name string
	test func(t *testing.T, d driver.Driver)
}

// rowRules is the conformance table: one row per rule of the driver contract
// (driver.Driver's doc) and of DESIGN.md section 3.
var rowRules = []rowRule{
	{"ClaimOfNewKeyCreatesRunningRow", testClaimNewKey},
	{"ClaimWhileRunningReturnsExistingRowUnclaimed", testClaimWhileRunning},
	{"ClaimWithDifferentFingerprintIsNotClaimed", testClaimDifferentFingerprint},
	{"ClaimAfterCompleteReturnsStoredResponse", testClaimAfterComplete},
	{"CompleteCopiesResponseBody", testCompleteCopiesBody},
	{"StoredResponseKeepsItsTrace", testResponseTrace},
	{"ExpiredRowIsClaimedAgain", testExpiredRowIsClaimed},
	{"LiveLeaseHoldsRowPastItsTTL", testLiveLeasePastTTL},
	{"LapsedRowWithSameFingerprintIsTakenOver", testLapsedSameFingerprintTakenOver},
	{"LapsedRowWithDifferentFingerprintIsNotTakenOver", testLapsedDifferentFingerprint},
	{"StaleOwnerCannotRenew", testStaleOwnerCannotRenew},
	{"StaleOwnerCannotComplete", testStaleOwnerCannotComplete},
	{"StaleOwnerCannotRelease", testStaleOwnerCannotRelease},
	{"NonOwnerCannotRenewCompleteOrRelease", testNonOwner},
	{"CompletedRowIsHeldByNoOwner", testCompletedRowHasNoOwner},
	{"LapsedOwnerStillHoldsRowUntilTakenOver", testLapsedOwnerStillHolds},
	{"RenewExtendsLease", testRenewExtendsLease},
	{"ReleaseDeletesRow", testReleaseDeletes},
	{"GetMissingKeyReturnsErrNotFound", testGetNotFound},
	{"GetReturnsExpiredRows", testGetExpired},
	{"ListIsInKeyOrderWithCursorAndLimit", testList},
	{"SweepDeletesExactlyTheExpiredRows", testSweep},
	{"SweepHonoursLimit", testSweepLimit},
	{"CloseMakesLaterCallsFailUnavailable", testClose},
	{"ScopesAreSeparateRows", testScopes},
	{"ClaimIsAtomicUnderConcurrency", testClaimConcurrent},
	{"TakeoverIsAtomicUnderConcurrency", testTakeoverConcurrent},
	{"ClaimsOnDistinctKeysAllSucceedConcurrently", testDistinctKeysConcurrent},
}

// --- fixtures ---------------------------------------------------------------

// testKey returns a key in one scope; name makes it unique within a test.
func testKey(name string) driver.Key {
	return driver.Key{
		Tenant:    "acme",
		Principal: "user:42",
		Flow:      "payments.charge",
		Key:       "idem-key-0000-" + name,
	}
}

func req(key driver.Key, fp, owner string, lease, ttl time.Duration) driver.ClaimRequest {
	return driver.ClaimRequest{Key: key, Fingerprint: fp, Owner: owner, Lease: lease, TTL: ttl}
}

// sampleResponse is a stored response whose body holds every byte value, so a
// driver that mangles binary or non-UTF-8 bodies fails.
func sampleResponse() driver.Response {
	body := []byte(`{"id":"ch_1","amount":500}` + "\n")
	for b := 0; b < 256; b++ {
		body = append(body, byte(b))
	}
	return driver.Response{
		Status:      201,
		ContentType: "application/json; charset=utf-8",
		Location:    "/charges/ch_1",
		Body:        body,
	}
}

// sampleTrace names a span as Response.Trace and Run.Trace do: trace ID
// and span ID in hex, joined by "-".
const sampleTrace = "4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7"

// tracedResponse is sampleResponse with the trace of the request that
// produced it.
func tracedResponse() driver.Response {
	r := sampleResponse()
	r.Trace = sampleTrace
	return r
}

func claim(t *testing.T, d driver.Driver, r driver.ClaimRequest) driver.ClaimResult {
	t.Helper()
	res, err := d.Claim(t.Context(), r)
	if err != nil {
		t.Fatalf("Claim(%q, owner %q): %v", r.Key.Key, r.Owner, err)
	}
	return res
}

// mustClaim claims a key that must be free and returns the new row.
func mustClaim(t *testing.T, d driver.Driver, r driver.ClaimRequest) driver.ClaimResult {
	t.Helper()
	res := claim(t, d, r)
	if !res.Claimed {
		t.Fatalf("Claim(%q, owner %q): Claimed = false, want true (row owner %q, state %v)",
			r.Key.Key, r.Owner, res.Row.Owner, res.Row.State)
	}
	return res
}

func complete(t *testing.T, d driver.Driver, key driver.Key, owner string, resp driver.Response, ttl time.Duration) {
	t.Helper()
	if err := d.Complete(t.Context(), key, owner, resp, ttl); err != nil {
		t.Fatalf("Complete(%q, owner %q): %v", key.Key, owner, err)
	}
}

func get(t *testing.T, d driver.Driver, key driver.Key) driver.Row {
	t.Helper()
	row, err := d.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key.Key, err)
	}
	return row
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: err = %v, want %v", what, err, target)
	}
}

// near reports whether a and b are the same instant up to the store's
// precision.
func near(a, b time.Time) bool {
	d := a.Sub(b)
	return d < slack && d > -slack
}

// diffRow lists the fields in which got differs from want.
func diffRow(got, want driver.Row) []string {
	var d []string
	add := func(field string, g, w any) { d = append(d, fmt.Sprintf("%s = %v, want %v", field, g, w)) }
	if got.Key != want.Key {
		add("Key", got.Key, want.Key)
	}
	if got.Fingerprint != want.Fingerprint {
		add("Fingerprint", got.Fingerprint, want.Fingerprint)
	}
	if got.State != want.State {
		add("State", got.State, want.State)
	}
	if got.Owner != want.Owner {
		add("Owner", got.Owner, want.Owner)
	}
	if got.RunID != want.RunID {
		add("RunID", got.RunID, want.RunID)
	}
	for _, f := range []struct {
		name string
		g, w time.Time
	}{
		{"LeaseUntil", got.LeaseUntil, want.LeaseUntil},
		{"ExpiresAt", got.ExpiresAt, want.ExpiresAt},
		{"CreatedAt", got.CreatedAt, want.CreatedAt},
		{"CompletedAt", got.CompletedAt, want.CompletedAt},
	} {
		if f.g.IsZero() != f.w.IsZero() || !near(f.g, f.w) {
			add(f.name, f.g, f.w)
		}
	}
	if s := diffResponse(got.Response, want.Response); s != "" {
		d = append(d, s)
	}
	return d
}

func diffResponse(got, want *driver.Response) string {
	switch {
	case got == nil && want == nil:
		return ""
	case got == nil || want == nil:
		return fmt.Sprintf("Response = %v, want %v", got, want)
	case got.Status != want.Status || got.ContentType != want.ContentType ||
		got.Location != want.Location || !bytes.Equal(got.Body, want.Body):
		return fmt.Sprintf("Response = {%d %q %q body %q}, want {%d %q %q body %q}",
			got.Status, got.ContentType, got.Location, got.Body,
			want.Status, want.ContentType, want.Location, want.Body)
	case got.Trace != want.Trace:
		return fmt.Sprintf("Response.Trace = %q, want %q", got.Trace, want.Trace)
	}
	return ""
}

func sameRow(t *testing.T, what string, got, want driver.Row) {
	t.Helper()
	if d := diffRow(got, want); len(d) > 0 {
		t.Errorf("%s: row differs:\n\t%s", what, strings.Join(d, "\n\t"))
	}
}

// takenOver sets up a row claimed by "stale", whose lease lapsed and which
// "fresh" took over. It returns the key and fresh's row.
func takenOver(t *testing.T, d driver.Driver) (driver.Key, driver.Row) {
	t.Helper()
	key := testKey("taken-over")
	mustClaim(t, d, req(key, fpA, "stale", short, day))
	time.Sleep(after)
	res := mustClaim(t, d, req(key, fpA, "fresh", hold, day))
	if !res.TookOver {
		t.Fatalf("claim over a lapsed row with the same fingerprint: TookOver = false, want true")
	}
	return key, res.Row
}

// --- rules -----------------------------------------------------------------

func testClaimNewKey(t *testing.T, d driver.Driver) {
	key := testKey("new")
	r := req(key, fpA, "owner-1", hold, day)
	r.RunID = "run-1"
	before := time.Now()
	res := mustClaim(t, d, r)
	if res.TookOver || res.Previous != nil {
		t.Errorf("claim of a new key: TookOver = %v, Previous = %v; want false, nil", res.TookOver, res.Previous)
	}
	if res.Now.IsZero() || res.Now.Before(before.Add(-skew)) || res.Now.After(time.Now().Add(skew)) {
		t.Errorf("ClaimResult.Now = %v, want the store's clock near %v", res.Now, before)
	}
	want := driver.Row{
		Key:         key,
		Fingerprint: fpA,
		State:       driver.Running,
		Owner:       "owner-1",
		LeaseUntil:  res.Now.Add(hold),
		ExpiresAt:   res.Now.Add(day),
		CreatedAt:   res.Now,
		RunID:       "run-1",
	}
	sameRow(t, "claimed row", res.Row, want)
	sameRow(t, "Get after claim", get(t, d, key), want)
}

func testClaimWhileRunning(t *testing.T, d driver.Driver) {
	key := testKey("running")
	first := mustClaim(t, d, req(key, fpA, "owner-1", hold, day))
	res := claim(t, d, req(key, fpA, "owner-2", hold, day))
	if res.Claimed || res.TookOver || res.Previous != nil {
		t.Fatalf("second claim while running: Claimed %v, TookOver %v, Previous %v; want false, false, nil",
			res.Claimed, res.TookOver, res.Previous)
	}
	sameRow(t, "row returned to the second claim", res.Row, first.Row)
	if res.Now.IsZero() {
		t.Errorf("ClaimResult.Now is zero, want the store's clock")
	}
	if !res.Row.LeaseUntil.After(res.Now) {
		t.Errorf("LeaseUntil %v is not after the store's Now %v (Retry-After needs it)", res.Row.LeaseUntil, res.Now)
	}
}

func testClaimDifferentFingerprint(t *testing.T, d driver.Driver) {
	running := testKey("running")
	first := mustClaim(t, d, req(running, fpA, "owner-1", hold, day))
	res := claim(t, d, req(running, fpB, "owner-2", hold, day))
	if res.Claimed {
		t.Fatalf("claim with a different fingerprint while running: Claimed = true")
	}
	sameRow(t, "row returned while running", res.Row, first.Row)

	done := testKey("completed")
	mustClaim(t, d, req(done, fpA, "owner-1", hold, day))
	complete(t, d, done, "owner-1", sampleResponse(), day)
	stored := get(t, d, done)
	res = claim(t, d, req(done, fpB, "owner-2", hold, day))
	if res.Claimed {
		t.Fatalf("claim with a different fingerprint after complete: Claimed = true")
	}
	sameRow(t, "row returned after complete", res.Row, stored)
}

func testClaimAfterComplete(t *testing.T, d driver.Driver) {
	for _, tc := range []struct {
		name string
		resp driver.Response
	}{
		{"created", sampleResponse()},
		{"traced", tracedResponse()},
		{"no-content", driver.Response{Status: 204}},
		{"declared-failure", driver.Response{Status: 402, ContentType: "application/json",
			Body: []byte(`{"error":{"code":"PaymentDeclined","message":"card declined"}}`)}},
	} {
		key := testKey(tc.name)
		claimed := mustClaim(t, d, req(key, fpA, "owner-1", hold, time.Hour))
		complete(t, d, key, "owner-1", tc.resp, day)
		res := claim(t, d, req(key, fpA, "owner-2", hold, time.Hour))
		if res.Claimed || res.TookOver || res.Previous != nil {
			t.Fatalf("%s: claim after complete: Claimed %v, TookOver %v, Previous %v; want false, false, nil",
				tc.name, res.Claimed, res.TookOver, res.Previous)
		}
		row := res.Row
		if row.State != driver.Completed {
			t.Fatalf("%s: State = %v, want completed", tc.name, row.State)
		}
		if s := diffResponse(row.Response, &tc.resp); s != "" {
			t.Errorf("%s: %s", tc.name, s)
		}
		if row.Fingerprint != fpA || row.Key != key || row.RunID != claimed.Row.RunID {
			t.Errorf("%s: key/fingerprint/run changed by Complete: %+v", tc.name, row)
		}
		if row.CompletedAt.IsZero() || row.CompletedAt.Before(claimed.Row.CreatedAt.Add(-slack)) {
			t.Errorf("%s: CompletedAt = %v, want a time after the claim at %v", tc.name, row.CompletedAt, claimed.Row.CreatedAt)
		}
		// Complete renews the TTL from its own now: ttl day, not the claim's hour.
		if !near(row.ExpiresAt, row.CompletedAt.Add(day)) {
			t.Errorf("%s: ExpiresAt = %v, want CompletedAt+ttl = %v", tc.name, row.ExpiresAt, row.CompletedAt.Add(day))
		}
		sameRow(t, tc.name+": Get after complete", get(t, d, key), row)
	}
}

// testResponseTrace: the trace of the request that produced a response
// (Response.Trace, what a replay's span links to) is stored with it, as
// given, and comes back from every read of the row: the claim that
// replays it, Get and List. A response stored without one has none, also
// where the key's earlier, expired response had one.
func testResponseTrace(t *testing.T, d driver.Driver) {
	traced, untraced, reused := testKey("traced"), testKey("untraced"), testKey("reused")
	want := tracedResponse()
	mustClaim(t, d, req(traced, fpA, "owner-1", hold, day))
	complete(t, d, traced, "owner-1", want, day)
	mustClaim(t, d, req(untraced, fpA, "owner-1", hold, day))
	complete(t, d, untraced, "owner-1", sampleResponse(), day)
	mustClaim(t, d, req(reused, fpA, "owner-1", hold, day))
	complete(t, d, reused, "owner-1", tracedResponse(), short)

	time.Sleep(after)
	// The expired row's key, claimed again and completed without a trace.
	if res := claim(t, d, req(reused, fpB, "owner-2", hold, day)); !res.Claimed || res.Row.Response != nil {
		t.Fatalf("claim of the expired key: Claimed %v, response %+v; want claimed, no response", res.Claimed, res.Row.Response)
	}
	complete(t, d, reused, "owner-2", sampleResponse(), day)

	for _, tc := range []struct {
		key  driver.Key
		fp   string
		want driver.Response
	}{{traced, fpA, want}, {untraced, fpA, sampleResponse()}, {reused, fpB, sampleResponse()}} {
		if s := diffResponse(get(t, d, tc.key).Response, &tc.want); s != "" {
			t.Errorf("%s: Get: %s", tc.key.Key, s)
		}
		res := claim(t, d, req(tc.key, tc.fp, "owner-3", hold, day))
		if res.Claimed {
			t.Fatalf("%s: the replay's claim: Claimed = true", tc.key.Key)
		}
		if s := diffResponse(res.Row.Response, &tc.want); s != "" {
			t.Errorf("%s: the replay's claim: %s", tc.key.Key, s)
		}
	}
	rows, err := d.List(t.Context(), driver.Key{}, many)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	for _, r := range rows {
		if r.Key == traced {
			if s := diffResponse(r.Response, &want); s != "" {
				t.Errorf("List: %s", s)
			}
			return
		}
	}
	t.Errorf("List: no row %q", traced.Key)
}

func testCompleteCopiesBody(t *testing.T, d driver.Driver) {
	key := testKey("copy")
	mustClaim(t, d, req(key, fpA, "owner-1", hold, day))
	resp := sampleResponse()
	want := sampleResponse()
	complete(t, d, key, "owner-1", resp, day)
	for i := range resp.Body {
		resp.Body[i] = 'x' // the caller reuses its buffer
	}
	got := get(t, d, key)
	if s := diffResponse(got.Response, &want); s != "" {
		t.Errorf("stored response changed when the caller reused its buffer: %s", s)
	}
}

func testExpiredRowIsClaimed(t *testing.T, d driver.Driver) {
	// A completed row whose TTL passed.
	done := testKey("completed")
	mustClaim(t, d, req(done, fpA, "owner-1", hold, day))
	complete(t, d, done, "owner-1", sampleResponse(), short)
	stored := get(t, d, done)

	// A running row whose lease and TTL both passed.
	running := testKey("running")
	first := mustClaim(t, d, req(running, fpA, "owner-1", short, short))

	time.Sleep(after)

	for _, tc := range []struct {
		key  driver.Key
		prev driver.Row
	}{{done, stored}, {running, first.Row}} {
		// A different request may use the key once its TTL has passed.
		res := claim(t, d, req(tc.key, fpB, "owner-2", hold, day))
		if !res.Claimed {
			t.Fatalf("%s: claim after TTL: Claimed = false (row %+v)", tc.key.Key, res.Row)
		}
		if res.TookOver {
			t.Errorf("%s: claim after TTL: TookOver = true, want false (an expired row is replaced, not resumed)", tc.key.Key)
		}
		if res.Previous == nil {
			t.Fatalf("%s: claim after TTL: Previous = nil, want the expired row", tc.key.Key)
		}
		sameRow(t, tc.key.Key+": Previous", *res.Previous, tc.prev)
		if res.Row.Owner != "owner-2" || res.Row.Fingerprint != fpB || res.Row.State != driver.Running || res.Row.Response != nil {
			t.Errorf("%s: new row = %+v, want running, owner-2, fpB, no response", tc.key.Key, res.Row)
		}
		sameRow(t, tc.key.Key+": Get", get(t, d, tc.key), res.Row)
	}
}

func testLiveLeasePastTTL(t *testing.T, d driver.Driver) {
	// Expired means TTL passed and no live lease: a flow still running past
	// its row's TTL keeps the key.
	key := testKey("long-running")
	first := mustClaim(t, d, req(key, fpA, "owner-1", hold, short))
	time.Sleep(after)
	for _, fp := range []string{fpA, fpB} {
		res := claim(t, d, req(key, fp, "owner-2", hold, day))
		if res.Claimed {
			t.Fatalf("claim while a live lease holds a row whose TTL passed: Claimed = true, want false")
		}
		sameRow(t, "row returned", res.Row, first.Row)
	}
}

func testLapsedSameFingerprintTakenOver(t *testing.T, d driver.Driver) {
	carried := testKey("carried")
	given := testKey("given")
	for _, k := range []driver.Key{carried, given} {
		r := req(k, fpA, "owner-1", short, day)
		r.RunID = "run-1"
		mustClaim(t, d, r)
	}
	old := get(t, d, carried)
	time.Sleep(after)

	// Request without a RunID: the lapsed row's run is carried over so the
	// journal run resumes.
	res := claim(t, d, req(carried, fpA, "owner-2", hold, day))
	if !res.Claimed || !res.TookOver {
		t.Fatalf("claim over lapsed row: Claimed %v, TookOver %v; want true, true", res.Claimed, res.TookOver)
	}
	if res.Previous == nil {
		t.Fatalf("takeover: Previous = nil, want the lapsed row")
	}
	sameRow(t, "takeover Previous", *res.Previous, old)
	if res.Row.Owner != "owner-2" || res.Row.State != driver.Running || res.Row.Fingerprint != fpA {
		t.Errorf("takeover row = %+v, want running, owner-2, fpA", res.Row)
	}
	if res.Row.RunID != "run-1" {
		t.Errorf("takeover without a RunID: RunID = %q, want the lapsed row's %q", res.Row.RunID, "run-1")
	}
	if !near(res.Row.LeaseUntil, res.Now.Add(hold)) {
		t.Errorf("takeover LeaseUntil = %v, want Now+lease = %v", res.Row.LeaseUntil, res.Now.Add(hold))
	}
	sameRow(t, "Get after takeover", get(t, d, carried), res.Row)

	// Request with its own RunID: the lapsed row's run still wins, so the
	// same request resumes the same run however often it is taken over.
	r := req(given, fpA, "owner-2", hold, day)
	r.RunID = "run-2"
	res = claim(t, d, r)
	if !res.Claimed || !res.TookOver {
		t.Fatalf("claim over lapsed row: Claimed %v, TookOver %v; want true, true", res.Claimed, res.TookOver)
	}
	if res.Row.RunID != "run-1" {
		t.Errorf("takeover with RunID run-2 of a row linked to run-1: RunID = %q, want run-1", res.Row.RunID)
	}
}

func testLapsedDifferentFingerprint(t *testing.T, d driver.Driver) {
	key := testKey("lapsed")
	first := mustClaim(t, d, req(key, fpA, "owner-1", short, day))
	time.Sleep(after)
	res := claim(t, d, req(key, fpB, "owner-2", hold, day))
	if res.Claimed || res.TookOver || res.Previous != nil {
		t.Fatalf("claim with a different fingerprint over a lapsed row: Claimed %v, TookOver %v, Previous %v; want false, false, nil",
			res.Claimed, res.TookOver, res.Previous)
	}
	sameRow(t, "row returned", res.Row, first.Row)
	sameRow(t, "Get", get(t, d, key), first.Row)
}

func testStaleOwnerCannotRenew(t *testing.T, d driver.Driver) {
	key, fresh := takenOver(t, d)
	err := d.Renew(t.Context(), key, "stale", hold)
	wantErr(t, "Renew by the stale owner", err, driver.ErrNotOwner)
	sameRow(t, "row after stale Renew", get(t, d, key), fresh)
}

func testStaleOwnerCannotComplete(t *testing.T, d driver.Driver) {
	key, fresh := takenOver(t, d)
	staleResp := driver.Response{Status: 201, ContentType: "application/json", Body: []byte(`{"by":"stale"}`)}
	err := d.Complete(t.Context(), key, "stale", staleResp, day)
	wantErr(t, "Complete by the stale owner", err, driver.ErrNotOwner)
	sameRow(t, "row after stale Complete", get(t, d, key), fresh)

	// The new owner's result is stored, and a late stale write cannot
	// overwrite it either.
	freshResp := sampleResponse()
	complete(t, d, key, "fresh", freshResp, day)
	err = d.Complete(t.Context(), key, "stale", staleResp, day)
	wantErr(t, "Complete by the stale owner after the new owner completed", err, driver.ErrNotOwner)
	row := get(t, d, key)
	if row.State != driver.Completed {
		t.Fatalf("State = %v, want completed", row.State)
	}
	if s := diffResponse(row.Response, &freshResp); s != "" {
		t.Errorf("stored response is not the new owner's: %s", s)
	}
}

func testStaleOwnerCannotRelease(t *testing.T, d driver.Driver) {
	key, fresh := takenOver(t, d)
	err := d.Release(t.Context(), key, "stale")
	wantErr(t, "Release by the stale owner", err, driver.ErrNotOwner)
	sameRow(t, "row after stale Release", get(t, d, key), fresh)
}

// fenced is each fenced primitive, called as owner.
var fenced = []struct {
	name string
	call func(t *testing.T, d driver.Driver, key driver.Key, owner string) error
}{
	{"Renew", func(t *testing.T, d driver.Driver, key driver.Key, owner string) error {
		return d.Renew(t.Context(), key, owner, hold)
	}},
	{"Complete", func(t *testing.T, d driver.Driver, key driver.Key, owner string) error {
		return d.Complete(t.Context(), key, owner, driver.Response{Status: 500}, day)
	}},
	{"Release", func(t *testing.T, d driver.Driver, key driver.Key, owner string) error {
		return d.Release(t.Context(), key, owner)
	}},
}

func testNonOwner(t *testing.T, d driver.Driver) {
	key := testKey("held")
	first := mustClaim(t, d, req(key, fpA, "owner-1", hold, day))
	for _, f := range fenced {
		for _, owner := range []string{"owner-2", ""} {
			err := f.call(t, d, key, owner)
			wantErr(t, fmt.Sprintf("%s by non-owner %q", f.name, owner), err, driver.ErrNotOwner)
		}
		// A key with no row is held by nobody: ErrNotOwner, not ErrNotFound.
		err := f.call(t, d, testKey("missing"), "owner-1")
		wantErr(t, f.name+" of a missing key", err, driver.ErrNotOwner)
	}
	sameRow(t, "row after non-owner calls", get(t, d, key), first.Row)
	if _, err := d.Get(t.Context(), testKey("missing")); !errors.Is(err, driver.ErrNotFound) {
		t.Errorf("a fenced call on a missing key created a row: Get err = %v", err)
	}
}

func testCompletedRowHasNoOwner(t *testing.T, d driver.Driver) {
	key := testKey("done")
	mustClaim(t, d, req(key, fpA, "owner-1", hold, day))
	complete(t, d, key, "owner-1", sampleResponse(), day)
	stored := get(t, d, key)
	for _, f := range fenced {
		err := f.call(t, d, key, "owner-1")
		wantErr(t, f.name+" by the former owner of a completed row", err, driver.ErrNotOwner)
	}
	sameRow(t, "completed row after fenced calls", get(t, d, key), stored)
}

func testLapsedOwnerStillHolds(t *testing.T, d driver.Driver) {
	// A lapsed lease is an offer, not a transfer: until another claim takes
	// the row over, the holder may still renew and complete it.
	key := testKey("lapsed")
	mustClaim(t, d, req(key, fpA, "owner-1", short, day))
	time.Sleep(after)
	if err := d.Renew(t.Context(), key, "owner-1", hold); err != nil {
		t.Fatalf("Renew by the holder of a lapsed row nobody took: %v", err)
	}
	res := claim(t, d, req(key, fpA, "owner-2", hold, day))
	if res.Claimed {
		t.Fatalf("claim after the holder renewed: Claimed = true, want false")
	}
	resp := sampleResponse()
	complete(t, d, key, "owner-1", resp, day)
	if s := diffResponse(get(t, d, key).Response, &resp); s != "" {
		t.Errorf("%s", s)
	}
}

func testRenewExtendsLease(t *testing.T, d driver.Driver) {
	key := testKey("renew")
	first := mustClaim(t, d, req(key, fpA, "owner-1", short, day))
	if err := d.Renew(t.Context(), key, "owner-1", hold); err != nil {
		t.Fatalf("Renew by owner: %v", err)
	}
	row := get(t, d, key)
	if !row.LeaseUntil.After(first.Row.LeaseUntil.Add(hold / 2)) {
		t.Errorf("LeaseUntil after Renew(%v) = %v, want about a minute after the claim's %v",
			hold, row.LeaseUntil, first.Row.LeaseUntil)
	}
	want := first.Row
	want.LeaseUntil = row.LeaseUntil
	sameRow(t, "row after Renew (only LeaseUntil moves)", row, want)

	// The claim's own short lease has ended; the renewed one has not.
	time.Sleep(after)
	res := claim(t, d, req(key, fpA, "owner-2", hold, day))
	if res.Claimed {
		t.Fatalf("claim during a renewed lease: Claimed = true, want false")
	}
	if !res.Row.LeaseUntil.After(res.Now) {
		t.Errorf("renewed LeaseUntil %v is not after Now %v", res.Row.LeaseUntil, res.Now)
	}
}

func testReleaseDeletes(t *testing.T, d driver.Driver) {
	key := testKey("release")
	mustClaim(t, d, req(key, fpA, "owner-1", hold, day))
	if err := d.Release(t.Context(), key, "owner-1"); err != nil {
		t.Fatalf("Release by owner: %v", err)
	}
	_, err := d.Get(t.Context(), key)
	wantErr(t, "Get after Release", err, driver.ErrNotFound)
	// The key is free again, for any request.
	res := mustClaim(t, d, req(key, fpB, "owner-2", hold, day))
	if res.Previous != nil || res.TookOver {
		t.Errorf("claim after Release: Previous %v, TookOver %v; want nil, false", res.Previous, res.TookOver)
	}
	err = d.Release(t.Context(), key, "owner-1")
	wantErr(t, "second Release by the old owner", err, driver.ErrNotOwner)
}

func testGetNotFound(t *testing.T, d driver.Driver) {
	_, err := d.Get(t.Context(), testKey("missing"))
	wantErr(t, "Get of a missing key", err, driver.ErrNotFound)
	// Near misses in scope are missing too.
	mustClaim(t, d, req(testKey("present"), fpA, "owner-1", hold, day))
	k := testKey("present")
	k.Tenant = "other"
	_, err = d.Get(t.Context(), k)
	wantErr(t, "Get in another tenant", err, driver.ErrNotFound)
}

func testGetExpired(t *testing.T, d driver.Driver) {
	key := testKey("expired")
	mustClaim(t, d, req(key, fpA, "owner-1", hold, day))
	complete(t, d, key, "owner-1", sampleResponse(), short)
	time.Sleep(after)
	row := get(t, d, key)
	if row.State != driver.Completed || row.Response == nil {
		t.Errorf("Get of an expired row = %+v, want the completed row", row)
	}
}

func testList(t *testing.T, d driver.Driver) {
	// Keys chosen so that component-wise order differs from the order of the
	// concatenated strings and from locale collation: drivers must compare
	// tenant, principal, flow, key in turn, bytewise (Postgres: COLLATE "C").
	keys := []driver.Key{
		{Tenant: "a", Principal: "zz", Flow: "f", Key: "k-0000000000000001"},
		{Tenant: "ab", Principal: "c", Flow: "f", Key: "k-0000000000000001"},
		{Tenant: "B", Principal: "user:1", Flow: "f", Key: "k-0000000000000001"},
		{Tenant: "a", Principal: "user:1", Flow: "payments.charge", Key: "Zeta-000000000000"},
		{Tenant: "a", Principal: "user:1", Flow: "payments.charge", Key: "alpha-00000000000"},
		{Tenant: "a", Principal: "user:1", Flow: "payments.charge", Key: "_under-0000000000"},
		{Tenant: "a", Principal: "user:1", Flow: "payments.charge", Key: "-dash-00000000000"},
		{Tenant: "a", Principal: "user:1", Flow: "payments.charge", Key: "~tilde-0000000000"},
		{Tenant: "a", Principal: "user:1", Flow: "payments.refund", Key: "alpha-00000000000"},
		{Tenant: "a", Principal: "user:10", Flow: "payments.charge", Key: "alpha-00000000000"},
		{Tenant: "a", Principal: "user:2", Flow: "a", Key: "alpha-00000000000"},
		{Tenant: "a", Principal: "apikey:9", Flow: "z", Key: "alpha-00000000000"},
	}
	for i, k := range keys {
		mustClaim(t, d, req(k, fmt.Sprintf("%064x", i), fmt.Sprintf("owner-%d", i), hold, day))
	}
	// One completed row, so List returns responses too.
	resp := sampleResponse()
	complete(t, d, keys[4], "owner-4", resp, day)

	want := append([]driver.Key(nil), keys...)
	for i := 1; i < len(want); i++ { // insertion sort with the contract's order
		for j := i; j > 0 && driver.KeyLess(want[j], want[j-1]); j-- {
			want[j], want[j-1] = want[j-1], want[j]
		}
	}

	all, err := d.List(t.Context(), driver.Key{}, 100)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if got := rowKeys(all); !equalKeys(got, want) {
		t.Fatalf("List order:\n\tgot  %v\n\twant %v", got, want)
	}
	for _, r := range all {
		i := indexOf(keys, r.Key)
		if r.Fingerprint != fmt.Sprintf("%064x", i) || r.State == 0 {
			t.Errorf("List row %v = %+v, want the full stored row", r.Key, r)
		}
		if i == 4 {
			if s := diffResponse(r.Response, &resp); s != "" {
				t.Errorf("List row %v: %s", r.Key, s)
			}
		}
	}

	// Pages of 5 after a cursor reassemble the whole list.
	var paged []driver.Key
	cursor := driver.Key{}
	for page := 0; ; page++ {
		rows, err := d.List(t.Context(), cursor, 5)
		if err != nil {
			t.Fatalf("List page %d: %v", page, err)
		}
		if len(rows) > 5 {
			t.Fatalf("List page %d: %d rows, limit 5", page, len(rows))
		}
		if len(rows) == 0 {
			break
		}
		paged = append(paged, rowKeys(rows)...)
		cursor = rows[len(rows)-1].Key
		if page > len(keys) {
			t.Fatalf("List paging does not end")
		}
	}
	if !equalKeys(paged, want) {
		t.Errorf("paged List:\n\tgot  %v\n\twant %v", paged, want)
	}

	// The cursor is exclusive, and need not be a stored key.
	rows, err := d.List(t.Context(), want[2], 2)
	if err != nil {
		t.Fatalf("List after a key: %v", err)
	}
	if got := rowKeys(rows); !equalKeys(got, want[3:5]) {
		t.Errorf("List after %v limit 2 = %v, want %v", want[2], got, want[3:5])
	}
	between := want[6]
	between.Key += "-"
	rows, err = d.List(t.Context(), between, 1)
	if err != nil {
		t.Fatalf("List after a key that is not stored: %v", err)
	}
	if got := rowKeys(rows); !equalKeys(got, want[7:8]) {
		t.Errorf("List after %v limit 1 = %v, want %v", between, got, want[7:8])
	}
}

func rowKeys(rows []driver.Row) []driver.Key {
	ks := make([]driver.Key, len(rows))
	for i, r := range rows {
		ks[i] = r.Key
	}
	return ks
}

func equalKeys(a, b []driver.Key) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func indexOf(keys []driver.Key, k driver.Key) int {
	for i := range keys {
		if keys[i] == k {
			return i
		}
	}
	return -1
}

func testSweep(t *testing.T, d driver.Driver) {
	var (
		completedExpired = testKey("completed-expired")
		runningExpired   = testKey("running-expired")
		liveLease        = testKey("running-live-lease-ttl-passed")
		completedLive    = testKey("completed-live")
		lapsedLive       = testKey("running-lapsed-ttl-live")
		runningLive      = testKey("running-live")
	)
	mustClaim(t, d, req(completedExpired, fpA, "o", hold, day))
	complete(t, d, completedExpired, "o", sampleResponse(), short)
	mustClaim(t, d, req(runningExpired, fpA, "o", short, short))
	// TTL passes while a live lease still holds the row: not expired.
	mustClaim(t, d, req(liveLease, fpA, "o", hold, short))
	mustClaim(t, d, req(completedLive, fpA, "o", hold, day))
	complete(t, d, completedLive, "o", sampleResponse(), day)
	// Lease lapsed, TTL not passed: lapsed but not expired.
	mustClaim(t, d, req(lapsedLive, fpA, "o", short, day))
	mustClaim(t, d, req(runningLive, fpA, "o", hold, day))

	time.Sleep(after)

	n, err := d.Sweep(t.Context(), 100)
	if err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	if n != 2 {
		t.Errorf("Sweep deleted %d rows, want 2", n)
	}
	for _, k := range []driver.Key{completedExpired, runningExpired} {
		if _, err := d.Get(t.Context(), k); !errors.Is(err, driver.ErrNotFound) {
			t.Errorf("expired row %s after Sweep: Get err = %v, want ErrNotFound", k.Key, err)
		}
	}
	for _, k := range []driver.Key{liveLease, completedLive, lapsedLive, runningLive} {
		if _, err := d.Get(t.Context(), k); err != nil {
			t.Errorf("unexpired row %s after Sweep: Get err = %v, want the row kept", k.Key, err)
		}
	}
	n, err = d.Sweep(t.Context(), 100)
	if err != nil || n != 0 {
		t.Errorf("second Sweep = %d, %v; want 0, nil", n, err)
	}
}

func testSweepLimit(t *testing.T, d driver.Driver) {
	const expired = 5
	for i := range expired {
		mustClaim(t, d, req(testKey(fmt.Sprint("expired-", i)), fpA, "o", short, short))
	}
	mustClaim(t, d, req(testKey("live"), fpA, "o", hold, day))
	time.Sleep(after)

	total := 0
	for _, limit := range []int{2, 2, 2} {
		n, err := d.Sweep(t.Context(), limit)
		if err != nil {
			t.Fatalf("Sweep(%d): %v", limit, err)
		}
		if n > limit {
			t.Errorf("Sweep(%d) deleted %d rows, more than the limit", limit, n)
		}
		total += n
	}
	if total != expired {
		t.Errorf("three Sweep(2) calls deleted %d rows, want %d (2, 2, 1)", total, expired)
	}
	rows, err := d.List(t.Context(), driver.Key{}, 100)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if len(rows) != 1 || rows[0].Key != testKey("live") {
		t.Errorf("rows left after sweeping = %v, want only the live one", rowKeys(rows))
	}
}

func testClose(t *testing.T, d driver.Driver) {
	key := testKey("close")
	mustClaim(t, d, req(key, fpA, "owner-1", hold, day))
	if err := d.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	ctx := t.Context()
	calls := []struct {
		name string
		call func() error
	}{
		{"Claim", func() error { _, err := d.Claim(ctx, req(testKey("new"), fpA, "o", hold, day)); return err }},
		{"Renew", func() error { return d.Renew(ctx, key, "owner-1", hold) }},
		{"Complete", func() error { return d.Complete(ctx, key, "owner-1", sampleResponse(), day) }},
		{"Release", func() error { return d.Release(ctx, key, "owner-1") }},
		{"Get", func() error { _, err := d.Get(ctx, key); return err }},
		{"List", func() error { _, err := d.List(ctx, driver.Key{}, 10); return err }},
		{"Sweep", func() error { _, err := d.Sweep(ctx, 10); return err }},
	}
	for _, c := range calls {
		err := c.call()
		if !errors.Is(err, driver.ErrUnavailable) || !errors.Is(err, driver.ErrClosed) {
			t.Errorf("%s after Close: err = %v, want ErrClosed (which is ErrUnavailable)", c.name, err)
		}
	}
}

func testScopes(t *testing.T, d driver.Driver) {
	base := testKey("shared")
	tenant, principal, flow := base, base, base
	tenant.Tenant = "globex"
	principal.Principal = "apikey:7"
	flow.Flow = "payments.refund"
	keys := []driver.Key{base, tenant, principal, flow}
	for i, k := range keys {
		res := claim(t, d, req(k, fmt.Sprintf("%064x", i), fmt.Sprintf("owner-%d", i), hold, day))
		if !res.Claimed {
			t.Fatalf("claim of %+v: Claimed = false; the same key in another scope must be its own row (found %+v)", k, res.Row.Key)
		}
	}
	resp := sampleResponse()
	complete(t, d, base, "owner-0", resp, day)
	for i, k := range keys {
		row := get(t, d, k)
		if row.Key != k || row.Fingerprint != fmt.Sprintf("%064x", i) ||
			(i > 0 && row.Owner != fmt.Sprintf("owner-%d", i)) {
			t.Errorf("Get(%+v) = %+v, want that scope's own row", k, row)
		}
		if (i == 0) != (row.State == driver.Completed) {
			t.Errorf("Get(%+v): state %v; completing one scope must not touch another", k, row.State)
		}
	}
}

// race starts n goroutines at once, each calling f(i), and returns when all
// are done.
func race(n int, f func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			f(i)
		})
	}
	close(start)
	wg.Wait()
}

// claimRace has n owners claim key at once and checks exactly one won; it
// returns the winning result.
func claimRace(t *testing.T, d driver.Driver, key driver.Key, n int) driver.ClaimResult {
	t.Helper()
	results := make([]driver.ClaimResult, n)
	errs := make([]error, n)
	race(n, func(i int) {
		results[i], errs[i] = d.Claim(t.Context(), req(key, fpA, fmt.Sprintf("racer-%d", i), hold, day))
	})
	var won []int
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("racer %d: Claim: %v", i, errs[i])
		}
		if results[i].Claimed {
			won = append(won, i)
		}
	}
	if len(won) != 1 {
		t.Fatalf("%d goroutines claimed one key at once: %d claimed (%v), want exactly 1", n, len(won), won)
	}
	winner := results[won[0]]
	for i, r := range results {
		if !r.Claimed && r.Row.Owner != winner.Row.Owner {
			t.Errorf("racer %d lost but saw owner %q, want the winner %q", i, r.Row.Owner, winner.Row.Owner)
		}
	}
	sameRow(t, "stored row after the race", get(t, d, key), winner.Row)
	return winner
}

func testClaimConcurrent(t *testing.T, d driver.Driver) {
	res := claimRace(t, d, testKey("race"), 100)
	if res.TookOver || res.Previous != nil {
		t.Errorf("winner of a new key: TookOver %v, Previous %v; want false, nil", res.TookOver, res.Previous)
	}
}

func testTakeoverConcurrent(t *testing.T, d driver.Driver) {
	key := testKey("race-takeover")
	mustClaim(t, d, req(key, fpA, "crashed", short, day))
	time.Sleep(after)
	res := claimRace(t, d, key, 100)
	if !res.TookOver || res.Previous == nil || res.Previous.Owner != "crashed" {
		t.Errorf("winner over a lapsed row: TookOver %v, Previous %+v; want true and the crashed owner's row", res.TookOver, res.Previous)
	}
}

func testDistinctKeysConcurrent(t *testing.T, d driver.Driver) {
	const workers, perWorker = 16, 25
	errs := make(chan error, workers*perWorker)
	race(workers, func(w int) {
		for i := range perWorker {
			key := testKey(fmt.Sprintf("w%02d-k%02d", w, i))
			res, err := d.Claim(t.Context(), req(key, fpA, fmt.Sprintf("owner-%d-%d", w, i), hold, day))
			switch {
			case err != nil:
				errs <- fmt.Errorf("claim %s: %w", key.Key, err)
			case !res.Claimed:
				errs <- fmt.Errorf("claim %s: Claimed = false (row owner %q)", key.Key, res.Row.Owner)
			}
		}
	})
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	rows, err := d.List(t.Context(), driver.Key{}, workers*perWorker+10)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if len(rows) != workers*perWorker {
		t.Errorf("List after concurrent claims: %d rows, want %d", len(rows), workers*perWorker)
	}
}
