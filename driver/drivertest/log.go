package drivertest

import (
	"io"
	"log/slog"
)

// quietLogger drops the app's logs for rules that fail flows on purpose.
func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
