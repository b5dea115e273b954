package cron

import (
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the zones below, wherever the tests run
)

func mustLoc(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func TestParseErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct {
		spec, field, want string
	}{
		{"", "", "has 0 fields, want 5"},
		{"* * * *", "", "has 4 fields, want 5"},
		{"* * * * * *", "", "has 6 fields, want 5"},
		{"60 * * * *", "minute", "60 is out of range 0–59"},
		{"* 24 * * *", "hour", "24 is out of range 0–23"},
		{"* * 0 * *", "day of month", "0 is out of range 1–31"},
		{"* * 32 * *", "day of month", "32 is out of range 1–31"},
		{"* * * 13 *", "month", "13 is out of range 1–12"},
		{"* * * foo *", "month", `"foo" is not a number from 1 to 12 or a name (JAN–DEC)`},
		{"* * * * 8", "day of week", "8 is out of range 0–7"},
		{"* * * * funday", "day of week", "or a name (SUN–SAT)"},
		{"*/0 * * * *", "minute", `step "0" in "*/0" is not a whole number of at least 1`},
		{"*/x * * * *", "minute", `step "x"`},
		{"5-1 * * * *", "minute", "range \"5-1\" runs backwards (5 > 1)"},
		{"1,,2 * * * *", "minute", "empty list item"},
		{"- * * * *", "minute", "a value is missing"},
		{"a * * * *", "minute", `"a" is not a number from 0 to 59`},
		{"0 0 30 2 *", "day of month", "would never tick"},
		{"0 0 31 4,6,9,11 *", "day of month", "would never tick"},
		{"@fortnightly", "", `unknown macro "@fortnightly"`},
		{"@every", "", "@every needs a duration"},
		{"@every soon", "", `"soon" is not a duration`},
		{"@every 500ms", "", "not a whole number of seconds of at least 1s"},
		{"@every 1500ms", "", "not a whole number of seconds"},
		{"@every -1m", "", "not a whole number of seconds of at least 1s"},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			_, err := Parse(tc.spec, nil)
			if err == nil {
				t.Fatalf("Parse(%q) = nil error, want one about %s", tc.spec, tc.want)
			}
			e, ok := err.(*Error)
			if !ok {
				t.Fatalf("error is %T, want *Error", err)
			}
			if e.Field != tc.field || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse(%q) = %q (field %q), want field %q and %q", tc.spec, err, e.Field, tc.field, tc.want)
			}
			if tc.field != "" && !strings.Contains(err.Error(), "field "+tc.field+":") {
				t.Fatalf("error %q does not name the field %q", err, tc.field)
			}
		})
	}
}

func TestParseAccepts(t *testing.T) {
	for _, spec := range []string{
		"* * * * *", "0 3 * * *", "*/15 * * * *", "0 9-17/2 * * MON-FRI", "0 0 1,15 * *",
		"30 4 * jan,Jul sun", "0 0 * * 7", "0 0 29 2 *", "10/20 * * * *", "0 0 30 2 1",
		"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly", "@every 90s", "@every 1h30m",
		"  0 3 * * *  ",
	} {
		if _, err := Parse(spec, nil); err != nil {
			t.Errorf("Parse(%q): %v", spec, err)
		}
	}
}

var utc = time.UTC

func at(loc *time.Location, s string) time.Time {
	t, err := time.ParseInLocation("2006-01-02 15:04:05", s, loc)
	if err != nil {
		panic(err)
	}
	return t
}

// TestNext: the first tick strictly after t, one row per rule; want is a
// wall time in the schedule's location, or an RFC 3339 instant.
func TestNext(t *testing.T) {
	paris := mustLoc(t, "Europe/Paris")
	ny := mustLoc(t, "America/New_York")
	for _, tc := range []struct {
		name, spec string
		loc        *time.Location
		from       string
		want       []string // the next ticks, in order (RFC 3339)
	}{
		{"every minute is strictly after", "* * * * *", utc, "2026-01-01 10:00:00", []string{"2026-01-01T10:01:00Z", "2026-01-01T10:02:00Z"}},
		{"seconds round up to the next minute", "* * * * *", utc, "2026-01-01 10:00:59", []string{"2026-01-01T10:01:00Z"}},
		{"daily at 03:00", "0 3 * * *", utc, "2026-01-01 03:00:00", []string{"2026-01-02T03:00:00Z", "2026-01-03T03:00:00Z"}},
		{"steps of 15", "*/15 * * * *", utc, "2026-01-01 10:07:00", []string{"2026-01-01T10:15:00Z", "2026-01-01T10:30:00Z", "2026-01-01T10:45:00Z", "2026-01-01T11:00:00Z"}},
		{"range with step", "0 9-17/4 * * *", utc, "2026-01-01 09:00:00", []string{"2026-01-01T13:00:00Z", "2026-01-01T17:00:00Z", "2026-01-02T09:00:00Z"}},
		{"value with step runs to the max", "10/20 * * * *", utc, "2026-01-01 10:00:00", []string{"2026-01-01T10:10:00Z", "2026-01-01T10:30:00Z", "2026-01-01T10:50:00Z", "2026-01-01T11:10:00Z"}},
		{"month end: the 31st skips short months", "0 0 31 * *", utc, "2026-01-31 00:00:00", []string{"2026-03-31T00:00:00Z", "2026-05-31T00:00:00Z", "2026-07-31T00:00:00Z", "2026-08-31T00:00:00Z"}},
		{"year end rolls over", "59 23 31 12 *", utc, "2026-06-01 00:00:00", []string{"2026-12-31T23:59:00Z", "2027-12-31T23:59:00Z"}},
		{"leap day every four years", "0 0 29 2 *", utc, "2024-02-29 00:00:00", []string{"2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"}},
		{"not on 2100's missing leap day", "0 0 29 2 *", utc, "2096-03-01 00:00:00", []string{"2104-02-29T00:00:00Z"}},
		{"weekdays by name", "0 9 * * MON-FRI", utc, "2026-01-02 09:00:00", []string{"2026-01-05T09:00:00Z", "2026-01-06T09:00:00Z"}}, // 2 Jan 2026 is a Friday
		{"7 is Sunday", "0 0 * * 7", utc, "2026-01-01 00:00:00", []string{"2026-01-04T00:00:00Z", "2026-01-11T00:00:00Z"}},
		{"both day fields restricted: either", "0 0 13 * FRI", utc, "2026-02-01 00:00:00", []string{"2026-02-06T00:00:00Z", "2026-02-13T00:00:00Z", "2026-02-20T00:00:00Z", "2026-02-27T00:00:00Z", "2026-03-06T00:00:00Z"}},
		{"day of month with a starred week: both", "0 0 */10 * *", utc, "2026-01-01 00:00:00", []string{"2026-01-11T00:00:00Z", "2026-01-21T00:00:00Z", "2026-01-31T00:00:00Z", "2026-02-01T00:00:00Z"}},
		{"@monthly", "@monthly", utc, "2026-01-15 00:00:00", []string{"2026-02-01T00:00:00Z", "2026-03-01T00:00:00Z"}},
		{"@weekly is Sunday midnight", "@weekly", utc, "2026-01-01 00:00:00", []string{"2026-01-04T00:00:00Z"}},
		{"@hourly", "@hourly", utc, "2026-01-01 10:30:00", []string{"2026-01-01T11:00:00Z", "2026-01-01T12:00:00Z"}},
		{"@every aligns to the epoch", "@every 1h", paris, "2026-01-01 10:30:00", []string{"2026-01-01T10:00:00Z", "2026-01-01T11:00:00Z"}},
		{"@every 90s", "@every 90s", utc, "1970-01-01 00:00:00", []string{"1970-01-01T00:01:30Z", "1970-01-01T00:03:00Z"}},
		{"a time zone", "0 3 * * *", paris, "2026-01-01 00:00:00", []string{"2026-01-01T02:00:00Z", "2026-01-02T02:00:00Z"}},

		// Spring forward in Paris, 29 March 2026: 02:00 CET becomes 03:00 CEST.
		{"spring: a skipped time ticks shifted by the gap", "30 2 * * *", paris, "2026-03-28 12:00:00", []string{"2026-03-29T01:30:00Z", "2026-03-30T00:30:00Z"}},
		{"spring: a skipped time merges with its shifted twin", "30 2,3 * * *", paris, "2026-03-29 00:00:00", []string{"2026-03-29T01:30:00Z", "2026-03-30T00:30:00Z"}},
		{"spring: daily at 03:00 is on time", "0 3 * * *", paris, "2026-03-28 12:00:00", []string{"2026-03-29T01:00:00Z", "2026-03-30T01:00:00Z"}},
		{"spring: hourly loses the missing hour", "0 * * * *", paris, "2026-03-29 01:30:00", []string{"2026-03-29T01:00:00Z", "2026-03-29T02:00:00Z"}},
		{"spring: from inside the shifted hour", "30 2 * * *", paris, "2026-03-29 03:10:00", []string{"2026-03-29T01:30:00Z"}},
		// Fall back in Paris, 25 October 2026: 03:00 CEST becomes 02:00 CET.
		{"fall: a repeated time ticks once, the first time", "30 2 * * *", paris, "2026-10-24 12:00:00", []string{"2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"}},
		{"fall: every 30 minutes skips the repeated wall times", "*/30 * * * *", paris, "2026-10-25 01:30:00", []string{"2026-10-25T00:00:00Z", "2026-10-25T00:30:00Z", "2026-10-25T02:00:00Z", "2026-10-25T02:30:00Z"}},
		// New York, 8 March and 1 November 2026.
		{"New York spring", "30 2 * * *", ny, "2026-03-07 12:00:00", []string{"2026-03-08T07:30:00Z", "2026-03-09T06:30:00Z"}},
		{"New York fall", "30 1 * * *", ny, "2026-10-31 12:00:00", []string{"2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse(tc.spec, tc.loc)
			if err != nil {
				t.Fatal(err)
			}
			cur := at(tc.loc, tc.from)
			for i, w := range tc.want {
				want, err := time.Parse(time.RFC3339, w)
				if err != nil {
					t.Fatal(err)
				}
				got, ok := s.Next(cur)
				if !ok || !got.Equal(want) {
					t.Fatalf("%q in %v: tick %d after %v = %v (ok %v), want %v", tc.spec, tc.loc, i+1, cur.UTC(), got.UTC(), ok, want)
				}
				cur = got
			}
		})
	}
}

// TestPrevIsTheLastTickAtOrBeforeT: Prev agrees with Next wherever it is
// asked, across month ends, leap years and both daylight-saving changes.
func TestPrevIsTheLastTickAtOrBeforeT(t *testing.T) {
	paris := mustLoc(t, "Europe/Paris")
	specs := []string{"* * * * *", "*/30 * * * *", "30 2 * * *", "0 0 31 * *", "0 0 29 2 *", "0 9 * * MON-FRI", "@every 7m", "0 3 * * *"}
	froms := []string{"2026-03-29 01:00:00", "2026-03-29 03:10:00", "2026-10-25 02:10:00", "2026-10-25 02:50:00", "2026-03-01 00:00:00", "2028-03-01 00:00:00", "2026-01-05 09:00:00"}
	for _, spec := range specs {
		s, err := Parse(spec, paris)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range froms {
			for _, shift := range []time.Duration{0, time.Second, 59 * time.Minute} {
				tt := at(paris, f).Add(shift)
				p, ok := s.Prev(tt)
				if !ok {
					t.Fatalf("%q: Prev(%v): none", spec, tt)
				}
				if p.After(tt) {
					t.Fatalf("%q: Prev(%v) = %v, after it", spec, tt, p)
				}
				if n, _ := s.Next(p); !n.After(tt) {
					t.Fatalf("%q: Prev(%v) = %v, but Next of it is %v, not after %v", spec, tt, p, n, tt)
				}
				if p.Equal(tt) {
					continue
				}
				if n, _ := s.Next(p.Add(-time.Nanosecond)); !n.Equal(p) {
					t.Fatalf("%q: Prev(%v) = %v, which is not a tick (Next before it is %v)", spec, tt, p, n)
				}
			}
		}
	}
}

func TestPrevOfATickIsItself(t *testing.T) {
	s, _ := Parse("0 3 * * *", nil)
	tick := at(utc, "2026-05-01 03:00:00")
	if p, _ := s.Prev(tick); !p.Equal(tick) {
		t.Fatalf("Prev(%v) = %v, want the tick itself", tick, p)
	}
	if p, _ := s.Prev(tick.Add(-time.Nanosecond)); !p.Equal(tick.AddDate(0, 0, -1)) {
		t.Fatalf("Prev just before a tick = %v, want the day before's", p)
	}
}
