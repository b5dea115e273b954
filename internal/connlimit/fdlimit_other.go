//go:build !unix

package connlimit

// FDLimit is the process's open-file limit, and whether it is known: on
// this system it is not.
func FDLimit() (int, bool) { return 0, false }
