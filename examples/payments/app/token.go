package app

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"unicode"
)

// TokenFileName is the file in the data folder (-data) where the demo
// writes the admin token it drew at start, readable by its owner only, when
// none was given: the token itself is never logged.
const TokenFileName = "admin-token"

// maxTokenFile bounds what -admin-token-file may hold.
const maxTokenFile = 4 << 10

// givenAdminToken is the admin token the configuration gives: the file
// cfg.AdminTokenFile names, else cfg.AdminToken (-admin-token, else
// $OKE_ADMIN_TOKEN). "" means none: Open draws one (writeTokenFile).
func givenAdminToken(cfg Config, log *slog.Logger) (string, error) {
	if cfg.AdminTokenFile != "" {
		return readTokenFile(cfg.AdminTokenFile, log)
	}
	return cfg.AdminToken, nil
}

// readTokenFile reads the admin token from path: one line, its trailing
// newline dropped. A file other users may read is used, with a warning.
func readTokenFile(path string, log *slog.Logger) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("-admin-token-file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
	if err != nil {
		return "", fmt.Errorf("-admin-token-file: read %s: %w", path, err)
	}
	if len(b) > maxTokenFile {
		return "", fmt.Errorf("-admin-token-file: %s is larger than %d bytes: it should hold the admin token alone", path, maxTokenFile)
	}
	token := strings.TrimRight(string(b), "\r\n")
	switch {
	case token == "":
		return "", fmt.Errorf("-admin-token-file: %s is empty: write the admin token in it (e.g. openssl rand -hex 32 > %s)", path, path)
	case strings.IndexFunc(token, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
		return "", fmt.Errorf("-admin-token-file: %s holds spaces, control characters or more than one line: it should hold the admin token alone, on one line", path)
	}
	if fi, err := f.Stat(); err == nil && runtime.GOOS != "windows" && fi.Mode().Perm()&0o004 != 0 {
		log.Warn("payments: the -admin-token-file is readable by every user of this machine; chmod 600 it",
			"file", path, "mode", fi.Mode().Perm().String())
	}
	return token, nil
}

// writeTokenFile writes a drawn admin token to TokenFileName in dir, which
// it creates if need be, readable by the owner only, and returns its path.
// It replaces the file whole (a rename), so a reader never sees half a
// token.
func writeTokenFile(dir, token string) (string, error) {
	if dir == "" {
		return "", errors.New("no admin token: set -admin-token-file, -admin-token or $OKE_ADMIN_TOKEN, or -data for the demo to write a random one in")
	}
	path := filepath.Join(dir, TokenFileName)
	fail := func(err error) (string, error) {
		return "", fmt.Errorf("write the drawn admin token to %s (or give one with -admin-token-file): %w", path, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fail(err)
	}
	f, err := os.CreateTemp(dir, TokenFileName+".*.tmp") // mode 0600
	if err != nil {
		return fail(err)
	}
	_, err = io.WriteString(f, token+"\n")
	if err == nil {
		err = f.Chmod(0o600)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return fail(err)
	}
	return path, nil
}
