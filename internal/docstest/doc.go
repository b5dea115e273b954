// Package docstest holds the test that keeps README.md and docs/*.md true:
// it builds every Go block of them in a throwaway module that requires this
// checkout, and runs their curl walkthroughs against the demo.
//
// The conventions a doc's author follows:
//
//   - A ```go block that starts with a package clause is a whole file and is
//     built as it stands, in a package of its own.
//   - Any other ```go block is a fragment. If it parses as the declarations
//     of a file it is built as one; if not, as the body of a function
//     (returning oke.Response[T], error when the block returns
//     oke.Response[T]{}). Its imports are added from the package names it
//     uses (see imports). A fragment may declare a variable it does not use
//     again: it is an excerpt.
//   - The names a doc's fragments share but do not show (ctx, fx, the types
//     of the example) are declared in a hidden setup: an HTML comment whose
//     first line is `<!-- docs:setup` and last `-->`, holding Go
//     declarations (imports are added as for a fragment). It is built with
//     every fragment after it, up to the next setup.
//   - A line `<!-- docs:skip REASON -->` right before a block leaves it out;
//     the test reports each skipped block and its reason.
//
// The curl walkthroughs (TestWalkthroughs):
//
//   - A shell block (```sh, bash, shell, console) with the line
//     `<!-- docs:run -->` right before it is run with bash -euo pipefail in
//     a fresh folder, against a demo of its page's own (as `go run
//     ./examples/payments` there: the file driver, data and admin-token in
//     .oke), after the run blocks above it on the page, in the same shell:
//     variables and exports carry over, as in a reader's terminal. Each
//     page gets a new demo, so a page may count what it did (metrics, ids).
//     localhost:8080 in a command is the demo's address.
//   - A shell block that calls curl on localhost:8080 must be marked
//     docs:run or docs:skip REASON.
//   - The comment lines right under a command (no blank line between) are
//     what it prints: each must be a whole line of its stdout, in that order
//     (other lines may come between). … stands for any text; a note in
//     parentheses after two or more spaces is not part of the line. A
//     command that prints must show at least one line of it; one that shows
//     nothing must print nothing (send it to /dev/null). Comments after a
//     blank line are prose.
//   - A command's trailing comment (`curl … # the first request`) is prose;
//     one that starts with a status (`# 201`) is refused: show the status
//     line under the command (curl -i), where it is checked.
//   - Nothing may wait on a guess: a command that needs another to have got
//     somewhere polls for it (until …; do sleep 0.1; done), never sleeps a
//     fixed time for it. A sleep that only lets time pass (past a TTL) is
//     fine.
package docstest
