// Package app is the oke payments demo: a small payments API, built only
// from oke's public API, that shows every Idempotency-Key rule. Its flags,
// routes, JSON shapes, identity rules and metric names are a public contract
// (DESIGN.md section 6); outside tests rely on them.
//
// Run it with `go run ./examples/payments` or `oke serve`:
//
//	payments -addr 127.0.0.1:8080 -data .oke -lease 30s
//
// The idempotency rows and the journal of durable runs live in oke's file
// driver in -data, and the business
// data (charges, notes, webhook events, ...) in SQLite in the same folder
// (payments.db, WAL mode). -driver memory keeps the rows in memory instead,
// for load tests. -postgres DSN puts both in that Postgres database instead:
// oke's tables through the Postgres driver (schema oke, migrated at start)
// and the business tables (schema_postgres.sql, created if missing, in the
// DSN's current schema); several instances may share it.
//
// # Routes
//
//	POST /charges           payments.charge   Idempotency-Key required; 201 + Location
//	GET  /charges           payments.list     {"charges":[…]}: the caller's tenant's
//	GET  /charges/{id}      payments.get      one charge of the caller's tenant, or 404 NotFound
//	POST /refunds           payments.refund   durable: {"chargeId":…}; 201 + Location /refunds/{id};
//	                                          once per charge, else 409 AlreadyRefunded
//	GET  /refunds/{id}      payments.getRefund one refund of the caller's tenant, or 404 NotFound
//	POST /pipeline          demo.pipeline     durable: {"tag":…,"steps":n,"stepMs":ms}; 201 when done
//	GET  /pipeline/{tag}    demo.pipelineLog  {"tag":…,"steps":[{"step":1,"executions":1},…]}
//	POST /slow              demo.slow         {"ms":int}: waits, then writes a row; 201
//	POST /notes             demo.note         {"text":str}: TTL 2s; 201
//	POST /fail              demo.fail         {"when":"before"|"after"|"declared"}
//	POST /reminders         demo.remind       durable sleep: {"to":…,"delay":"2s"}; 204 at once
//	GET  /reminders         demo.reminders    {"reminders":[{"id":…,"to":…,"sent":bool},…]}
//	POST /export            demo.export       chunked NDJSON; never stored
//	GET  /events            demo.events       live SSE feed of emitted events
//	POST /webhooks/provider demo.webhook      deduped on the payload's "id"
//	GET  /whoami            demo.whoami       {"tenant":…,"principal":…}
//	GET  /metrics                             Prometheus text
//	GET  /healthz                             {"status":"ok"}
//	     /_oke/…                              oke's admin.Handler: runs, steps, replay, rows
//	     /_provider/refunds                   the fake refund provider (POST; GET lists)
//
// # Connections
//
// Server.HTTPServer is the http.Server Run serves with: headers must arrive
// within -read-header-timeout (10s) and a whole request within
// -read-timeout (30s), so a stalled body is cut off; an ordinary answer
// must be written within -write-timeout (2m) — streams and /events are
// exempt, as oke moves their write deadline along with each write; an
// idle keep-alive connection is closed after -idle-timeout (30s); headers
// are at most -max-header-bytes (64 KiB). Server.Listener caps the open
// connections at -max-conns (4096): at the cap a new one takes the place
// of the longest-idle one, so a flood of idle keep-alive connections
// cannot shut out new clients (internal/connlimit).
//
// # Durable flows
//
// payments.refund, demo.pipeline and demo.remind are durable
// (oke.Options{Durable: true}): each execution is a journal run in the file
// driver, whose steps' results are saved. After a crash the run picks up
// where it stopped — the app's scheduler resumes runs whose process died
// (every -poll, once their -lease lapsed), a retried Idempotency-Key resumes
// its own run, and a durable sleep wakes in whichever process holds the data
// folder when it is due. Only a step cut off between its effect and the
// save of its result runs again; see refundFlow for the rules that make that
// harmless.
//
// # Identity
//
// See Gate: "Authorization: Bearer user:ID" is user:ID, "X-API-Key: ID" is
// apikey:ID, neither is anon, any other Authorization is 401. The tenant is
// X-Tenant (default "default"). Errors are {"error":{"code":…,"message":…}}.
//
// Business data is the tenant's: a charge, and its refund, belong to the
// tenant that made the charge. Another tenant gets 404 for them — the same
// answer as for an id that does not exist — and does not see them in GET
// /charges.
package app
