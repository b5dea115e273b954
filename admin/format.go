package admin

import "math"

// roundMs rounds milliseconds to the microsecond (3 decimals), which is
// what ms gives each duration: a sum of them in float64 picks up noise
// (0.817+0.817+0.817 is 2.4509999999999996) that the JSON would show.
func roundMs(x float64) float64 { return math.Round(x*1000) / 1000 }
