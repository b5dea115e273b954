// Package cron parses cron schedules and computes their ticks: the five
// standard fields (minute, hour, day of month, month, day of week) with
// ranges, steps, lists and names, the macros @yearly, @monthly, @weekly,
// @daily, @hourly, and @every D. oke's schedule bindings (oke.Cron) use it;
// the ticker loop that turns ticks into runs lives in package oke.
//
// # Fields
//
//	field         values            names
//	minute        0–59
//	hour          0–23
//	day of month  1–31
//	month         1–12              JAN–DEC
//	day of week   0–7 (0, 7: Sun)   SUN–SAT
//
// Each field is *, a value, a range a-b, a list a,b-c, or any of those with
// a step: */15, 1-30/5, 10/20 (from 10 to the field's maximum, every 20).
// Names are case-insensitive. As in Vixie cron, when both day fields are
// restricted (neither starts with *) a day matches when either matches;
// otherwise both must.
//
// # Ticks and time zones
//
// A schedule ticks at every wall-clock minute of its location that
// matches, at second 0 (@every D: at every multiple of D since the Unix
// epoch, whatever the location, so that every process agrees on the ticks
// without talking). Across a daylight-saving change a wall time is one tick:
// a time skipped when clocks go forward ticks at the same wall time shifted
// by the gap (02:30 in a gap from 02:00 to 03:00 ticks at 03:30, merged
// with a 03:30 tick if there is one), and a time repeated when they go back
// ticks once, at its first occurrence. UTC has neither.
package cron

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"time"
)

// Schedule is a parsed cron spec. Its zero value never ticks.
type Schedule struct {
	spec  string
	loc   *time.Location
	every time.Duration // @every; the fields below are unused then

	minute, hour, dom, month, dow uint64 // bit i set: value i matches
	domStar, dowStar              bool   // the field starts with *
}

// Error is a spec that does not parse; Field names the field at fault ("" for
// the spec as a whole).
type Error struct {
	Spec  string
	Field string
	Msg   string
}

func (e *Error) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("cron spec %q: %s", e.Spec, e.Msg)
	}
	return fmt.Sprintf("cron spec %q: field %s: %s", e.Spec, e.Field, e.Msg)
}

var macros = map[string]string{
	"@yearly":   "0 0 1 1 *",
	"@annually": "0 0 1 1 *",
	"@monthly":  "0 0 1 * *",
	"@weekly":   "0 0 * * 0",
	"@daily":    "0 0 * * *",
	"@midnight": "0 0 * * *",
	"@hourly":   "0 * * * *",
}

type fieldDef struct {
	name     string
	min, max int
	names    []string // names[i] is value min+i
}

var fields = [5]fieldDef{
	{name: "minute", min: 0, max: 59},
	{name: "hour", min: 0, max: 23},
	{name: "day of month", min: 1, max: 31},
	{name: "month", min: 1, max: 12, names: []string{"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}},
	{name: "day of week", min: 0, max: 7, names: []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}},
}

// Parse parses spec for location loc (nil: UTC).
func Parse(spec string, loc *time.Location) (*Schedule, error) {
	if loc == nil {
		loc = time.UTC
	}
	s := &Schedule{spec: spec, loc: loc}
	text := strings.TrimSpace(spec)
	if strings.HasPrefix(text, "@every") {
		rest := strings.TrimSpace(strings.TrimPrefix(text, "@every"))
		if rest == "" || rest == text {
			return nil, &Error{Spec: spec, Msg: "@every needs a duration, e.g. @every 15m"}
		}
		d, err := time.ParseDuration(rest)
		switch {
		case err != nil:
			return nil, &Error{Spec: spec, Msg: fmt.Sprintf("@every: %q is not a duration (write e.g. 90s, 15m, 1h30m)", rest)}
		case d < time.Second || d%time.Second != 0:
			return nil, &Error{Spec: spec, Msg: fmt.Sprintf("@every: %v is not a whole number of seconds of at least 1s", d)}
		}
		s.every = d
		return s, nil
	}
	if strings.HasPrefix(text, "@") {
		m, ok := macros[strings.ToLower(text)]
		if !ok {
			return nil, &Error{Spec: spec, Msg: fmt.Sprintf("unknown macro %q; use @yearly, @monthly, @weekly, @daily, @hourly or @every D", text)}
		}
		text = m
	}
	parts := strings.Fields(text)
	if len(parts) != 5 {
		return nil, &Error{Spec: spec, Msg: fmt.Sprintf("has %d fields, want 5: minute hour day-of-month month day-of-week (e.g. \"0 3 * * *\")", len(parts))}
	}
	dst := [5]*uint64{&s.minute, &s.hour, &s.dom, &s.month, &s.dow}
	for i, p := range parts {
		bitsOf, err := parseField(p, fields[i])
		if err != nil {
			return nil, &Error{Spec: spec, Field: fields[i].name, Msg: err.Error()}
		}
		*dst[i] = bitsOf
	}
	if s.dow&(1<<7) != 0 { // 7 is Sunday too
		s.dow = s.dow&^(1<<7) | 1
	}
	s.domStar = strings.HasPrefix(parts[2], "*")
	s.dowStar = strings.HasPrefix(parts[4], "*")
	// With the day of week unrestricted the day of month alone decides
	// (with both restricted, either may): it must exist in a listed month.
	if s.dowStar && !s.possibleDay() {
		return nil, &Error{Spec: spec, Field: "day of month", Msg: "no listed day exists in any listed month (e.g. 30 in February), so the schedule would never tick"}
	}
	return s, nil
}

// possibleDay reports whether some listed day of month exists in some
// listed month (February counts 29 days).
func (s *Schedule) possibleDay() bool {
	days := [13]int{0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}
	for m := 1; m <= 12; m++ {
		if s.month&(1<<m) == 0 {
			continue
		}
		if s.dom&(uint64(1)<<(days[m]+1)-1) != 0 {
			return true
		}
	}
	return false
}

// parseField parses one comma-separated field into a bit set.
func parseField(p string, f fieldDef) (uint64, error) {
	var set uint64
	for _, item := range strings.Split(p, ",") {
		if item == "" {
			return 0, fmt.Errorf("%q has an empty list item", p)
		}
		rng, stepText, hasStep := strings.Cut(item, "/")
		step := 1
		if hasStep {
			n, err := strconv.Atoi(stepText)
			if err != nil || n < 1 {
				return 0, fmt.Errorf("step %q in %q is not a whole number of at least 1", stepText, item)
			}
			step = n
		}
		lo, hi := f.min, f.max
		if f.name == "day of week" && rng == "*" {
			hi = 6 // * is Sunday to Saturday once
		}
		switch {
		case rng == "*":
		case strings.Contains(rng, "-"):
			a, b, _ := strings.Cut(rng, "-")
			var err error
			if lo, err = value(a, f); err != nil {
				return 0, err
			}
			if hi, err = value(b, f); err != nil {
				return 0, err
			}
			if lo > hi {
				return 0, fmt.Errorf("range %q runs backwards (%d > %d)", rng, lo, hi)
			}
		default:
			v, err := value(rng, f)
			if err != nil {
				return 0, err
			}
			lo = v
			if !hasStep {
				hi = v // a single value; "10/20" runs from 10 to the maximum
			}
		}
		for v := lo; v <= hi; v += step {
			set |= 1 << v
		}
	}
	return set, nil
}

// value parses one number or name of field f.
func value(s string, f fieldDef) (int, error) {
	if s == "" {
		return 0, fmt.Errorf("a value is missing")
	}
	for i, n := range f.names {
		if strings.EqualFold(s, n) {
			return f.min + i, nil
		}
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		if f.names != nil {
			return 0, fmt.Errorf("%q is not a number from %d to %d or a name (%s–%s)", s, f.min, f.max, strings.ToUpper(f.names[0]), strings.ToUpper(f.names[len(f.names)-1]))
		}
		return 0, fmt.Errorf("%q is not a number from %d to %d", s, f.min, f.max)
	}
	if v < f.min || v > f.max {
		return 0, fmt.Errorf("%d is out of range %d–%d", v, f.min, f.max)
	}
	return v, nil
}

// String is the spec as given.
func (s *Schedule) String() string { return s.spec }

// Location is the schedule's time zone.
func (s *Schedule) Location() *time.Location { return s.loc }

// Every is the period of an @every schedule, else 0.
func (s *Schedule) Every() time.Duration { return s.every }

// dayMatches reports whether civil date c (in UTC, used as a calendar)
// matches the day fields.
func (s *Schedule) dayMatches(c time.Time) bool {
	dom := s.dom&(1<<c.Day()) != 0
	dow := s.dow&(1<<int(c.Weekday())) != 0
	if s.domStar || s.dowStar {
		return dom && dow
	}
	return dom || dow
}

// searchYears bounds the search for a tick: a schedule that can tick at
// all ticks within eight years (29 February on a Monday, at worst: with
// Vixie's rule that is either, so far less).
const searchYears = 8

// slack is how far around a wall-clock time the search looks for ticks
// that a daylight-saving change moved: more than any zone's shift.
const slack = 3 * time.Hour

// Next returns the first tick strictly after t, and false when the
// schedule never ticks again (a day that exists in no year searched).
func (s *Schedule) Next(t time.Time) (time.Time, bool) {
	if s.every > 0 {
		d := int64(s.every / time.Second)
		u := t.Unix()
		n := (u/d + 1) * d
		if u < 0 && u%d != 0 {
			n = (u / d) * d // Go's division truncates toward zero
		}
		return time.Unix(n, 0).In(s.loc), true
	}
	if s.minute == 0 {
		return time.Time{}, false
	}
	w := t.In(s.loc)
	c := time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), 0, 0, time.UTC).Add(time.Minute)
	if s.transitionNear(t) {
		// A wall time in a spring-forward gap maps to an instant after
		// the gap: one before t's own wall time may still tick after t.
		c = c.Add(-slack)
	}
	end := c.AddDate(searchYears, 0, 0)
	// Walk the matching wall-clock minutes. Away from a daylight-saving
	// change the first one after t is the next tick; near one, keep the
	// smallest instant after t among the wall times within slack of it.
	var best, bestCivil time.Time
	for c.Before(end) {
		nc, ok := s.nextCivil(c, end)
		if !ok || !best.IsZero() && nc.Sub(bestCivil) > 2*slack {
			break
		}
		at := s.instant(nc)
		if at.After(t) && (best.IsZero() || at.Before(best)) {
			if best.IsZero() {
				bestCivil = nc
				if !s.transitionNear(at) {
					return at, true
				}
			}
			best = at
		}
		c = nc.Add(time.Minute)
	}
	return best, !best.IsZero()
}

// transitionNear reports whether the location's UTC offset changes within
// slack of t.
func (s *Schedule) transitionNear(t time.Time) bool {
	_, before := t.Add(-slack).In(s.loc).Zone()
	_, after := t.Add(slack).In(s.loc).Zone()
	return before != after
}

// instant is the tick of civil minute c (a UTC time used as a calendar) in
// the location: the first instant with that wall time; for a wall time a
// spring-forward gap skips, the instant it names read with the offset
// before the gap, which lands after the gap, shifted by its length.
// (time.Date leaves both cases unspecified, and differs between zones.)
func (s *Schedule) instant(c time.Time) time.Time {
	// The offsets well before and well after c (transitions are weeks
	// apart; 36 hours covers every offset from -12 to +14).
	_, before := c.Add(-36 * time.Hour).In(s.loc).Zone()
	_, after := c.Add(36 * time.Hour).In(s.loc).Zone()
	a := c.Add(-time.Duration(before) * time.Second).In(s.loc)
	b := c.Add(-time.Duration(after) * time.Second).In(s.loc)
	if b.Before(a) {
		a, b = b, a
	}
	for _, x := range [2]time.Time{a, b} {
		if x.Minute() == c.Minute() && x.Hour() == c.Hour() && x.Day() == c.Day() && x.Month() == c.Month() && x.Year() == c.Year() {
			return x
		}
	}
	return c.Add(-time.Duration(before) * time.Second).In(s.loc)
}

// nextCivil returns the first civil minute at or after c (a UTC time used as
// a calendar) that matches the fields, before end.
func (s *Schedule) nextCivil(c, end time.Time) (time.Time, bool) {
	for c.Before(end) {
		if s.month&(1<<int(c.Month())) == 0 {
			c = time.Date(c.Year(), c.Month()+1, 1, 0, 0, 0, 0, time.UTC)
			continue
		}
		if !s.dayMatches(c) {
			c = time.Date(c.Year(), c.Month(), c.Day()+1, 0, 0, 0, 0, time.UTC)
			continue
		}
		if s.hour&(1<<c.Hour()) == 0 {
			c = time.Date(c.Year(), c.Month(), c.Day(), c.Hour()+1, 0, 0, 0, time.UTC)
			continue
		}
		if s.minute&(1<<c.Minute()) == 0 {
			// jump to the next listed minute of this hour, or the next hour
			rest := s.minute >> (c.Minute() + 1)
			if rest == 0 {
				c = time.Date(c.Year(), c.Month(), c.Day(), c.Hour()+1, 0, 0, 0, time.UTC)
			} else {
				c = c.Add(time.Duration(bits.TrailingZeros64(rest)+1) * time.Minute)
			}
			continue
		}
		return c, true
	}
	return time.Time{}, false
}

// Prev returns the last tick at or before t, and false when there is none
// in the years searched.
func (s *Schedule) Prev(t time.Time) (time.Time, bool) {
	if s.every > 0 {
		d := int64(s.every / time.Second)
		u := t.Unix()
		p := (u / d) * d
		if u < 0 && u%d != 0 {
			p -= d
		}
		return time.Unix(p, 0).In(s.loc), true
	}
	// Look back over windows that double until one holds a tick, then walk
	// forward with Next to the last one at or before t: Next alone defines
	// what the ticks are.
	for window := time.Hour; window <= searchYears*366*24*time.Hour; window *= 2 {
		p, ok := s.Next(t.Add(-window))
		if !ok {
			return time.Time{}, false
		}
		if p.After(t) {
			continue
		}
		for {
			n, ok := s.Next(p)
			if !ok || n.After(t) {
				return p, true
			}
			p = n
		}
	}
	return time.Time{}, false
}
