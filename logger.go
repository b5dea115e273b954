package oke

import "log/slog"

// Logger returns the app's logger (Config.Logger, or slog.Default() when
// none was given), for packages built on the app that log what they do —
// admin.Handler logs refused admin credentials there. A record logged
// with a context that carries a span (Logger().ErrorContext(ctx, …)) gets
// the span's trace_id and span_id, as the app's own records do.
func (a *App) Logger() *slog.Logger { return a.log }
