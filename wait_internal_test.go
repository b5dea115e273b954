package oke

import (
	"net/http/httptest"
	"testing"
	"time"
)

// TestPreferWait: RFC 7240's wait preference, read as DESIGN.md section 10
// says (seconds, at most 60), among other preferences (lists, several
// headers, any case, quoted values, parameters) and ignoring what it cannot
// read.
func TestPreferWait(t *testing.T) {
	for _, tc := range []struct {
		header []string
		want   time.Duration
	}{
		{nil, 0},
		{[]string{"wait=5"}, 5 * time.Second},
		{[]string{"respond-async, wait=10"}, 10 * time.Second},
		{[]string{"return=minimal", "Wait = 3"}, 3 * time.Second},
		{[]string{`wait="7"`}, 7 * time.Second},
		{[]string{"wait=600"}, 60 * time.Second},
		{[]string{"wait=0"}, 0},
		{[]string{"wait=-1"}, 0},
		{[]string{"wait=soon"}, 0},
		{[]string{"handling=lenient"}, 0},
		{[]string{"return=minimal, wait=5"}, 5 * time.Second},
		{[]string{"return=minimal,wait=5"}, 5 * time.Second},
		{[]string{"return=minimal", "wait=8"}, 8 * time.Second},
		{[]string{"WAIT=4"}, 4 * time.Second},
		{[]string{"wait=4; foo=bar"}, 4 * time.Second},
		{[]string{"wait = 4 ;foo"}, 4 * time.Second},
		{[]string{`foo="a, wait=9", wait=2`}, 2 * time.Second},
		{[]string{`foo="a \" wait=9", wait=2`}, 2 * time.Second},
		{[]string{`wait="1\2"`}, 12 * time.Second},
		{[]string{"wait=99999999999"}, 60 * time.Second},
		{[]string{"wait=5s"}, 0},
		{[]string{"wait="}, 0},
		{[]string{"wait"}, 0},
		{[]string{"respond-async; wait=5"}, 0}, // a parameter of respond-async, not a preference
		{[]string{"wait=3, wait=9"}, 3 * time.Second},
		{[]string{"", " , ,wait=6"}, 6 * time.Second},
	} {
		r := httptest.NewRequest("POST", "/", nil)
		for _, h := range tc.header {
			r.Header.Add("Prefer", h)
		}
		if got := preferWait(r); got != tc.want {
			t.Errorf("Prefer %q: %v, want %v", tc.header, got, tc.want)
		}
	}
}
