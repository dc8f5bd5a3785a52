// Package lint holds no code: its tests guard the conventions of the
// repository's Go source, the way pebble's internal/lint does. They parse
// every Go file of the module with go/parser (testdata, hidden and _
// directories and nested modules excepted; every build tag included),
// need no network and no build, and run in about a second:
//
//	go test ./internal/lint
//
// Each violation is reported as file:line with the convention it breaks
// and how to fix it. TestChecks tests the checks themselves on small
// trees.
//
// # The conventions
//
// "Product code" below is every file that is not a _test.go file and
// does not import testing; test suites and helpers such as storetest
// are test code.
//
//   - PackageDoc. Every package, test-only ones included (not the
//     external _test packages), has a package doc comment, in exactly
//     one file: a non-test file unless the package has only test files.
//     It starts "Package NAME ", or "Command " for a main package.
//     Staticcheck's ST1000 checks the same for the packages it builds.
//   - PackageNames. No package is named util, utils, common, helper,
//     helpers or misc: a package is named for what it provides.
//   - NoExit. Only package main and TestMain end the process: nothing
//     else refers to os.Exit or log.Fatal, Fatalf, Fatalln. Library code
//     returns errors; a test binary re-run as a helper process returns
//     its exit code to TestMain. Example functions may call log.Fatal,
//     being the body of a program's main shown in the docs.
//   - ErrorfWrap. In product code, fmt.Errorf formats an error argument
//     with %w (several are allowed), so that errors.Is and errors.As see
//     through it. Where the error must not be unwrapped (another error is
//     the cause, and this one only explains it), a comment
//     "//lint:nowrap REASON" on a line of the call allows it; keep these
//     rare. Without golang.org/x/tools in go.mod there is no type
//     information, so an error is recognised by its name: err, e, a name
//     ending in err or Err, a field so named, or a call x.Err() or
//     x.Error(), formatted with %v, %s or %q. A test's error message may
//     format a nil error, which %w prints as %!w(<nil>), so test code is
//     left alone.
//   - PanicReason. Product code does not call panic, except where the
//     panic cannot happen: then a comment starting "unreachable:" on the
//     panic's line, or ending on the line above, says why.
//   - ReadmeLayout. The ``` block under "## Layout" in README.md has one
//     line "PATH  what it holds" for every directory directly under
//     internal/, and every PATH it names exists (indented lines are
//     free-form notes). A new package directory fails the test until its
//     line is added; a moved one, until its line is fixed.
//   - ExportedDoc. In the non-test files of every package but main,
//     every exported function, method of an exported type, type,
//     constant and variable has a doc comment (a constant or variable may
//     share its group's, or have one at the end of its line).
//   - ContextFirst. A context.Context parameter comes first, after only a
//     test helper's *testing.T, *testing.B, *testing.F or testing.TB; in
//     declared functions, interface methods and function types, not in
//     function literals, whose signature is the type they are passed as.
//
// A convention is added here only when the tree already follows it, or
// every violation is fixed or listed for its owner in the same change.
package lint
