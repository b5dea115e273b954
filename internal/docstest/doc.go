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
package docstest
