package oke

import "log/slog"

// Logger returns the app's logger (Config.Logger, or slog.Default() when
// none was given), for packages built on the app that log what they do —
// admin.Handler logs refused admin credentials there.
func (a *App) Logger() *slog.Logger { return a.log }
