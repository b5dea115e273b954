package idem

import "testing"

// TestSettle: DESIGN.md section 3's rows for what is stored, one per case.
func TestSettle(t *testing.T) {
	for _, tc := range []struct {
		rule   string
		ran    Ran
		action RowAction
		answer Answer
	}{
		{"a buffered JSON response is stored until the TTL", Ran{Storable: true}, StoreResponse, AnswerLive},
		{"a buffered JSON response after effects is stored", Ran{Storable: true, NonRead: true}, StoreResponse, AnswerLive},
		{"a response too large to store leaves a tombstone", Ran{Storable: true, TooLarge: true}, StoreTombstone, AnswerLive},
		{"a stream, SSE or raw non-JSON body is not stored: the row is deleted", Ran{}, Release, AnswerLive},
		{"a failure before any non-read effect deletes the row", Ran{Failed: true}, Release, AnswerLive},
		{"a failure after a non-read effect stores 500", Ran{Failed: true, NonRead: true}, StoreFailure, AnswerLive},
		{"a declared failure is stored as itself", Ran{Failed: true, Declared: true}, StoreFailure, AnswerLive},
		{"a declared failure after effects is stored as itself", Ran{Failed: true, Declared: true, NonRead: true}, StoreFailure, AnswerLive},
		{"an unreachable database before any effect: released, 503 Unavailable", Ran{Failed: true, Unreachable: true}, Release, AnswerUnavailable},
		{"an unreachable database after an effect: stored as 500 (part of it happened)", Ran{Failed: true, Unreachable: true, NonRead: true}, StoreFailure, AnswerLive},
		{"a declared failure is an answer even when a database is down", Ran{Failed: true, Declared: true, Unreachable: true}, StoreFailure, AnswerLive},
	} {
		if a, ans := Settle(tc.ran); a != tc.action || ans != tc.answer {
			t.Errorf("%s: Settle(%+v) = %v, %v; want %v, %v", tc.rule, tc.ran, a, ans, tc.action, tc.answer)
		}
	}
}
