package lint

import (
	"fmt"
	"go/parser"
	"go/token"
	"path"
	"slices"
	"strings"
	"testing"
)

// fakeRepo parses files, source by path relative to a root that does not
// exist, as parseRepo parses the repository.
func fakeRepo(t *testing.T, files map[string]string) *repo {
	t.Helper()
	r := &repo{root: "/repo", fset: token.NewFileSet()}
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		f, err := parser.ParseFile(r.fset, "/repo/"+p, files[p], parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("parse %s: %v", p, err)
		}
		sf := &srcFile{path: p, dir: path.Dir(p), test: strings.HasSuffix(p, "_test.go"), ast: f}
		r.files = append(r.files, sf)
	}
	return r
}

// where returns the file:line of each finding, the line as three digits.
func where(fs []finding) []string {
	out := []string{}
	for _, f := range fs {
		out = append(out, fmt.Sprintf("%s:%03d", f.pos.Filename, f.pos.Line))
	}
	return out
}

// TestChecks runs each check on small trees, with and without
// violations, and compares where it reports them.
func TestChecks(t *testing.T) {
	tests := []struct {
		name  string
		check func(*repo) []finding
		files map[string]string
		want  []string // file:line, line as three digits
	}{
		{"PackageDoc/one", checkPackageDoc, map[string]string{
			"a/a.go": "// Package a does a.\npackage a\n",
			"a/b.go": "package a\n",
		}, nil},
		{"PackageDoc/none", checkPackageDoc, map[string]string{
			"a/a.go": "package a\n",
			"a/b.go": "package a\n",
		}, []string{"a/a.go:001"}},
		{"PackageDoc/twice", checkPackageDoc, map[string]string{
			"a/a.go": "// Package a does a.\npackage a\n",
			"a/b.go": "// Package a does b.\npackage a\n",
		}, []string{"a/b.go:001"}},
		{"PackageDoc/in a test file", checkPackageDoc, map[string]string{
			"a/a.go":      "package a\n",
			"a/a_test.go": "// Package a does a.\npackage a\n",
		}, []string{"a/a_test.go:001"}},
		{"PackageDoc/test-only package", checkPackageDoc, map[string]string{
			"e/e_test.go": "// Package e tests.\npackage e\n",
			"e/f_test.go": "package e\n",
		}, nil},
		{"PackageDoc/external tests", checkPackageDoc, map[string]string{
			"a/a.go":      "// Package a does a.\npackage a\n",
			"a/x_test.go": "// Package a_test is not documented.\npackage a_test\n",
			"a/y_test.go": "// Neither is this.\npackage a_test\n",
		}, nil},
		{"PackageDoc/form", checkPackageDoc, map[string]string{
			"a/a.go":        "// This package does a.\npackage a\n",
			"cmd/x/main.go": "// Command x does x.\npackage main\n",
			"cmd/y/main.go": "// Package main does y.\npackage main\n",
		}, []string{"a/a.go:001", "cmd/y/main.go:001"}},
		{"PackageDoc/directive is no doc", checkPackageDoc, map[string]string{
			"a/a.go": "//go:generate true\npackage a\n",
		}, []string{"a/a.go:002"}},

		{"PackageNames", checkPackageNames, map[string]string{
			"a/a.go":       "package a\n",
			"utils/u.go":   "package utils\n",
			"x/common.go":  "package common\n",
			"x/common2.go": "package common\n",
		}, []string{"utils/u.go:001", "x/common.go:001"}},

		{"NoExit", checkNoExit, map[string]string{
			"a/a.go": `package a

import (
	"log"
	xos "os"
)

func f() {
	xos.Exit(1)
	log.Fatalf("x")
	exit := xos.Exit
	_ = exit
	log.Printf("fine")
}
`,
			"a/a_test.go": `package a

import (
	"log"
	"os"
	"testing"
)

func TestMain(m *testing.M) { os.Exit(m.Run()) }

func helper() { os.Exit(2) }

func ExampleF() { log.Fatal("shown in the docs") }
`,
			"cmd/x/main.go": "package main\n\nimport \"os\"\n\nfunc main() { os.Exit(1) }\n",
			"b/b.go":        "package b\n\nfunc f(os struct{ Exit func(int) }) { os.Exit(1) }\n",
		}, []string{"a/a.go:009", "a/a.go:010", "a/a.go:011", "a/a_test.go:011"}},

		{"ErrorfWrap", checkErrorfWrap, map[string]string{
			"a/a.go": `package a

import (
	"context"
	"fmt"
)

func f(ctx context.Context, n int, err, closeErr error, x struct{ err error }) {
	_ = fmt.Errorf("a: %v", err)
	_ = fmt.Errorf("a: %w", err)
	_ = fmt.Errorf("a %d: %s", n, closeErr)
	_ = fmt.Errorf("a %[2]v %[1]d", n, err)
	_ = fmt.Errorf("a %*d %v", n, n, x.err)
	_ = fmt.Errorf("a %%v %w", err)
	_ = fmt.Errorf("a: %v", ctx.Err())
	_ = fmt.Errorf("a: %s", err.Error())
	_ = fmt.Errorf("a: %v", n)
	_ = fmt.Errorf("a: %v (%w)", err, context.Canceled) //lint:nowrap the cause is the cancellation
	_ = fmt.Errorf("a: %v", err) //lint:nowrap
	_ = fmt.Errorf("a: "+
		"%v", err)
	format := "%v"
	_ = fmt.Errorf(format, err)
	_ = fmt.Errorf("a: %w, %w", err, closeErr)
	_ = fmt.Errorf("a: %+v", err)
}
`,
			"a/a_test.go": "package a\n\nimport \"fmt\"\n\nfunc g(err error) error { return fmt.Errorf(\"%v\", err) }\n",
			"a/suite.go":  "package a\n\nimport (\n\t\"fmt\"\n\t\"testing\"\n)\n\nfunc h(t *testing.T, err error) error { return fmt.Errorf(\"%v\", err) }\n",
		}, []string{"a/a.go:009", "a/a.go:011", "a/a.go:012", "a/a.go:013", "a/a.go:015", "a/a.go:016", "a/a.go:019", "a/a.go:021", "a/a.go:025"}},

		{"PanicReason", checkPanicReason, map[string]string{
			"a/a.go": `package a

func f(x int) {
	if x == 1 {
		panic("no reason")
	}
	if x == 2 {
		// unreachable: f is never called with 2.
		panic("two")
	}
	if x == 3 {
		panic("three") // unreachable: nor with 3
	}
	if x == 4 {
		// unreachable: the callers check x first,
		// so 4 never gets here.
		panic("four")
	}
	if x == 5 {
		// This says nothing.
		panic("five")
	}
	if x == 6 {
		// unreachable: too far above.

		panic("six")
	}
}
`,
			"a/a_test.go": "package a\n\nfunc g() { panic(1) }\n",
		}, []string{"a/a.go:005", "a/a.go:021", "a/a.go:026"}},

		{"ExportedDoc", checkExportedDoc, map[string]string{
			"a/a.go": `package a

// T is documented.
type T struct{}

type U struct{}

func (T) M() {}

// N is documented.
func (*T) N() {}

func (u) M() {}

type u struct{}

func F() {}

func f() {}

// Group of types.
type (
	V int
	W int
)

const C = 1

const D = 2 // D is documented.

// Group of constants.
const (
	E = 1
	G = 2
)

var X, y = 1, 2
`,
			"a/a_test.go":   "package a\n\nfunc Helper() {}\n",
			"cmd/x/main.go": "// Command x.\npackage main\n\nfunc Run() {}\n",
		}, []string{"a/a.go:006", "a/a.go:008", "a/a.go:017", "a/a.go:027", "a/a.go:037"}},

		{"ContextFirst", checkContextFirst, map[string]string{
			"a/a.go": `package a

import (
	"context"
	"testing"
)

func F(ctx context.Context, n int) {}

func G(n int, ctx context.Context) {}

func H(t *testing.T, ctx context.Context) {}

func I(tb testing.TB, ctx context.Context, n int) {}

type J interface {
	M(n int, ctx context.Context)
}

type K func(n int, ctx context.Context)

func L() {
	call(func(_ any, ctx context.Context) {})
}

func call(func(any, context.Context)) {}

func N(a, b int, c context.Context) {}
`,
		}, []string{"a/a.go:010", "a/a.go:017", "a/a.go:020", "a/a.go:026", "a/a.go:028"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := where(tt.check(fakeRepo(t, tt.files)))
			want := tt.want
			if want == nil {
				want = []string{}
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("findings at %v, want %v", got, want)
			}
		})
	}
}

// TestFormatVerbs checks the arguments the verbs of a format take.
func TestFormatVerbs(t *testing.T) {
	tests := []struct {
		format string
		want   []verb
	}{
		{"plain", nil},
		{"%v", []verb{{'v', 0}}},
		{"%d %w", []verb{{'d', 0}, {'w', 1}}},
		{"100%% %s", []verb{{'s', 0}}},
		{"%-08.3f|%+q", []verb{{'f', 0}, {'q', 1}}},
		{"%*d %v", []verb{{'d', 1}, {'v', 2}}},
		{"%.*f %v", []verb{{'f', 1}, {'v', 2}}},
		{"%[2]v %[1]d %v", []verb{{'v', 1}, {'d', 0}, {'v', 1}}},
		{"%[3]*.[2]*[1]f", []verb{{'f', 0}}},
		{"trailing %", nil},
		{"%é", []verb{{'é', 0}}},
	}
	for _, tt := range tests {
		if got := formatVerbs(tt.format); !slices.Equal(got, tt.want) {
			t.Errorf("formatVerbs(%q) = %v, want %v", tt.format, got, tt.want)
		}
	}
}

// TestLayout checks the parsing of a README's layout block and its
// comparison with the directories under internal/.
func TestLayout(t *testing.T) {
	const readme = "# X\n\n## Layout\n\nSome words.\n\n```\n" +
		"cmd/x          main\n" +
		"internal/a     what a holds\n" +
		"  sub/         a part of a\n" +
		"internal/b/    what b holds\n" +
		"internal/gone  moved away\n" +
		"internal/a     again\n" +
		"```\n\n## After\n\n```\ninternal/z  not the layout\n```\n"
	tests := []struct {
		name string
		dirs []string // under internal/
		want []string
	}{
		{"complete", []string{"a", "b", "gone"}, []string{"README.md:013"}},
		{"missing and stale", []string{"a", "b", "c"}, []string{"README.md:007", "README.md:012", "README.md:013"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			entries, start, err := layoutEntries(readme)
			if err != nil {
				t.Fatal(err)
			}
			if start != 7 {
				t.Errorf("the block starts on line %d, want 7", start)
			}
			isDir := func(p string) bool {
				d, ok := strings.CutPrefix(p, "internal/")
				return p == "cmd/x" || ok && slices.Contains(tt.dirs, d)
			}
			got := where(compareLayout(entries, start, tt.dirs, isDir))
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("findings at %v, want %v", got, tt.want)
			}
		})
	}
	for _, bad := range []string{"# X\n", "## Layout\n\nno block\n\n## Next\n\n```\n```\n", "## Layout\n\n```\ninternal/a x\n"} {
		if _, _, err := layoutEntries(bad); err == nil {
			t.Errorf("layoutEntries(%q) found a block", bad)
		}
	}
}
