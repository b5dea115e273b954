// Package nemesis runs oke's demo under faults and checks what it answered.
//
// A run has three parts. A Recorder sends requests (POST /charges with an
// Idempotency-Key and an amount of the key's own, so that a row of the
// business table says which key charged it; POST /refunds of an
// acknowledged charge, one refund key per charge) and records every operation
// as an Op: the key, the body, when it was invoked and when it returned,
// the status, body and headers of the answer, or the error when there was
// none. Meanwhile the runner (cmd/nemesis) injects faults — SIGKILL and
// SIGSTOP of an instance, a full disk, a torn log tail, a Postgres stopped,
// hung or with its backends killed — and records each one as a Fault. At the
// end the runner retries every key until it gets an answer and reads the
// charges the business store holds.
//
// Check is a pure function of that History and those Effects. It reports,
// per run:
//
//   - lost: a key answered 2xx (acknowledged) whose charge is not in the
//     store, or whose last answer is not its first one;
//   - wrong answers: a 2xx answer of a key that differs (status, body,
//     Location) from the key's first 2xx answer;
//   - doubled: a key with more charges than the promise allows: one where
//     exactly-once is promised (the Postgres driver, whose fx.Tx commits the
//     charge and the stored answer together), at most one more on the file
//     driver, which is at-least-once across a crash between the SQLite
//     commit and the stored answer (docs/idempotency.md) — and that extra
//     one only for a key one of whose attempts may have run (no answer, or a
//     503 OutcomeUnknown); a key whose attempts all said "not run" (409, 503
//     StoreUnavailable) before its one live answer must have one charge. A
//     refund key may have one refund row and one refund at the provider
//     (Options.RoutePromise), whose repeated calls are counted as
//     ProviderRepeats, not violations;
//   - unexpected: an answer that no fault excuses: anything but 2xx, 409 and
//     503 (a 500, a 422 for the key's own payload, ...);
//   - unresolved: a key that ends without a 2xx answer after the retries;
//   - hung: a request that got no answer within the client's timeout from
//     an instance that was neither stopped nor killed meanwhile (a store
//     fault must give a prompt 503, not a hang);
//   - not linearizable: the key's register (the answer the key stores,
//     written at most once) checked with porcupine over the HTTP history: a
//     live answer after another answer was stored, a replay of a value no
//     operation could have written yet, two different values.
//
// Every count but acked and extra is a violation; Report.OK says whether
// there were none.
package nemesis
