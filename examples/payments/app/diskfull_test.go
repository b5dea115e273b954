package app_test

import (
	"context"
	"strconv"
	"testing"
)

// TestFullDiskIs503: issue 11 — with the business database's disk full, a
// charge is 503 Unavailable (its transaction rolled back, nothing stored),
// never 500 InternalError; once there is room again the same key charges.
// The full disk is real to SQLite: PRAGMA max_page_count caps the file at
// its current size, and the next write fails with SQLITE_FULL.
func TestFullDiskIs503(t *testing.T) {
	e := setup(t)
	db := e.srv.DB() // the one SQLite write connection
	ctx := context.Background()
	var pages int
	if err := db.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `PRAGMA max_page_count = `+strconv.Itoa(pages)); err != nil {
		t.Fatal(err)
	}
	key := newKey()
	body := `{"amount":1234,"currency":"usd"}`
	// Fill the last pages, then the next charge cannot be written.
	var r reply
	for i := 0; i < 10000; i++ {
		if r = e.do("POST", "/charges", body, "Idempotency-Key", key); r.Status != 201 {
			break
		}
		key = newKey()
	}
	r.want(t, 503, "Unavailable")
	if r.Header.Get("Retry-After") == "" {
		t.Fatalf("503 without Retry-After: %v", r.Header)
	}
	if _, err := db.ExecContext(ctx, `PRAGMA max_page_count = 1073741823`); err != nil {
		t.Fatal(err)
	}
	again := e.do("POST", "/charges", body, "Idempotency-Key", key)
	again.want(t, 201, "")
	if again.replayed() {
		t.Fatal("the 503 was stored and replayed")
	}
}
