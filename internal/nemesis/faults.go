package nemesis

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// MountTmpfs mounts a tmpfs of size bytes on dir (root only): a small
// disk the full-disk fault can fill. Unmount it with Unmount.
func MountTmpfs(dir string, size int64) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", dir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("mount a tmpfs on %s: %v: %s", dir, err, out)
	}
	return nil
}

// Unmount unmounts dir.
func Unmount(dir string) error {
	out, err := exec.Command("umount", dir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("umount %s: %v: %s", dir, err, out)
	}
	return nil
}

// FillDisk writes the file path until its file system is full and returns
// how many bytes it wrote; FreeDisk deletes it.
func FillDisk(path string) (int64, error) {
	f, err := os.Create(path)
	if err != nil {
		if errors.Is(err, syscall.ENOSPC) {
			return 0, nil
		}
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	var n int64
	for len(buf) > 0 {
		m, err := f.Write(buf)
		n += int64(m)
		if err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				return n, err
			}
			buf = buf[:len(buf)/16] // fill the last blocks too
		}
	}
	return n, nil
}

// LeaveRoom shrinks the file FillDisk wrote by n bytes: a disk nearly
// full, where small writes succeed and larger ones fail.
func LeaveRoom(path string, n int64) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	return os.Truncate(path, max(st.Size()-n, 0))
}

// FreeDisk deletes the file FillDisk wrote.
func FreeDisk(path string) error { return os.Remove(path) }

// TearTail damages the end of the file driver's log at path the way a
// crash can (docs: driver/file, "Crash safety"): it appends a record cut
// short (no newline), a whole line with a bad checksum, or zero bytes
// (an OS crash's unwritten pages). Open must drop such a tail and go on.
// It returns what it did.
func TearTail(path string, rng *rand.Rand) (string, error) {
	return tearTail(path, rng.IntN(tornKinds), rng)
}

// tornKinds is how many kinds of torn tail TearTail chooses from.
const tornKinds = 3

func tearTail(path string, kind int, rng *rand.Rand) (string, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	var tail []byte
	var what string
	switch kind {
	case 0:
		tail = []byte(`{"crc":"0badc0de","rec":{"k":"torn-record-cut-sh`)
		what = "a record cut short"
	case 1:
		tail = []byte(`{"crc":"00000000","rec":{"k":"a whole line with a bad checksum"}}` + "\n")
		what = "a line with a bad checksum"
	default:
		tail = make([]byte, 512+rng.IntN(3584))
		what = "zero bytes"
	}
	if _, err := f.Write(tail); err != nil {
		return "", err
	}
	return fmt.Sprintf("appended %s (%d bytes) to %s", what, len(tail), filepath.Base(path)), nil
}
