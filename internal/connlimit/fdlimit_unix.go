//go:build unix

package connlimit

import "syscall"

// FDLimit is the process's open-file limit (the soft RLIMIT_NOFILE; Go
// raises it to the hard limit at start on Linux), and whether it is known.
func FDLimit() (int, bool) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0, false
	}
	if r.Cur > 1<<30 {
		return 1 << 30, true
	}
	return int(r.Cur), true
}
