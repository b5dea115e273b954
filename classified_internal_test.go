package oke

import (
	"fmt"
	"testing"
)

// TestClassifiedIsClassifySQL: the remembered classification is
// ClassifySQL's, the first time and every time after, and what it
// remembers is bounded.
func TestClassifiedIsClassifySQL(t *testing.T) {
	for _, q := range []string{
		"SELECT * FROM charges",
		"INSERT INTO charges (amount) VALUES ($1) RETURNING id",
		"WITH moved AS (DELETE FROM a RETURNING *) INSERT INTO b SELECT * FROM moved",
		"SELECT * INTO backup FROM charges",
		"BEGIN",
		"",
	} {
		for i := range 2 {
			if got, want := classified(q), ClassifySQL(q); got != want {
				t.Errorf("classified(%q), call %d = %s, want %s", q, i+1, got, want)
			}
		}
	}
	for i := range classifiedMax + 10 {
		q := fmt.Sprintf("UPDATE t SET n = %d", i)
		if i%2 == 0 {
			q = fmt.Sprintf("SELECT %d", i)
		}
		if got, want := classified(q), ClassifySQL(q); got != want {
			t.Fatalf("classified(%q) = %s, want %s", q, got, want)
		}
	}
	n := 0
	classifiedSQL.Range(func(any, any) bool { n++; return true })
	if n > classifiedMax || classifiedN.Load() != int64(n) {
		t.Errorf("remembers %d statements (counted %d), want at most %d", n, classifiedN.Load(), classifiedMax)
	}
}
