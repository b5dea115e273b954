package postgres

import "time"

// micros is a duration as microseconds, Postgres's precision; queries turn it
// into an interval with `$n * interval '1 microsecond'`.
func micros(d time.Duration) int64 { return d.Microseconds() }

// nullTime is t, or NULL when t is zero.
func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

// nullText is s, or NULL when s is empty.
func nullText(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func derefTime(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

func derefText(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// limitArg is a LIMIT parameter: NULL (no limit) when limit <= 0.
func limitArg(limit int) any {
	if limit <= 0 {
		return nil
	}
	return limit
}
