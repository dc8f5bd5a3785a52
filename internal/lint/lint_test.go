package lint

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode"
	"unicode/utf8"
)

// A finding is one violation of a convention: where, and what to do.
type finding struct {
	pos token.Position // Filename relative to the repository's root
	msg string
}

func (f finding) String() string {
	if f.pos.Line == 0 {
		return f.pos.Filename + ": " + f.msg
	}
	return fmt.Sprintf("%s:%d: %s", f.pos.Filename, f.pos.Line, f.msg)
}

// A srcFile is one parsed Go file of the repository.
type srcFile struct {
	path string // slash-separated, relative to the repository's root
	dir  string // path's directory
	test bool   // a _test.go file
	ast  *ast.File
}

// pkgName is the name in f's package clause.
func (f *srcFile) pkgName() string { return f.ast.Name.Name }

// product reports whether f is product code: neither a _test.go file nor
// a file of a test suite or helper (one that imports testing).
func (f *srcFile) product() bool {
	if f.test {
		return false
	}
	for _, imp := range f.ast.Imports {
		if imp.Path.Value == `"testing"` {
			return false
		}
	}
	return true
}

// A repo is the Go source of the repository, parsed once.
type repo struct {
	root  string // absolute
	fset  *token.FileSet
	files []*srcFile
}

// position returns the position of p, relative to the root.
func (r *repo) position(p token.Pos) token.Position {
	pos := r.fset.Position(p)
	if rel, err := filepath.Rel(r.root, pos.Filename); err == nil && !strings.HasPrefix(rel, "..") {
		pos.Filename = filepath.ToSlash(rel)
	}
	return pos
}

// readFile reads a file by its path relative to the root.
func (r *repo) readFile(rel string) ([]byte, error) {
	return os.ReadFile(filepath.Join(r.root, filepath.FromSlash(rel)))
}

// internalDirs lists the directories directly under internal/.
func (r *repo) internalDirs() ([]string, error) {
	ents, err := os.ReadDir(filepath.Join(r.root, "internal"))
	if err != nil {
		return nil, err
	}
	var dirs []string
	for _, e := range ents {
		if e.IsDir() && !skipDir(e.Name()) {
			dirs = append(dirs, e.Name())
		}
	}
	return dirs, nil
}

// skipDir reports whether the go tool ignores a directory of that name
// (testdata, and names starting with . or _).
func skipDir(name string) bool {
	return name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")
}

// moduleRoot finds the directory of go.mod above the working directory.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

// parseRepo parses every Go file under root, as the go tool sees the
// tree: testdata, hidden and _ directories and nested modules are not
// part of it. Build constraints are ignored: every file is checked.
func parseRepo(root string) (*repo, error) {
	r := &repo{root: root, fset: token.NewFileSet()}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p == root {
				return nil
			}
			if skipDir(d.Name()) {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
				return filepath.SkipDir // another module
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_") {
			return nil
		}
		f, err := parser.ParseFile(r.fset, p, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		sf := &srcFile{path: rel, dir: path.Dir(rel), test: strings.HasSuffix(rel, "_test.go"), ast: f}
		r.files = append(r.files, sf)
		return nil
	})
	return r, err
}

var loadRepo = sync.OnceValues(func() (*repo, error) {
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	return parseRepo(root)
})

// theRepo returns the parsed repository, failing t when it cannot be read.
func theRepo(t *testing.T) *repo {
	t.Helper()
	r, err := loadRepo()
	if err != nil {
		t.Fatalf("parse the repository: %v", err)
	}
	if len(r.files) < 100 {
		t.Fatalf("found only %d Go files under %s: is this the repository?", len(r.files), r.root)
	}
	return r
}

// A check is one convention: what it says, how to fix a violation, and
// the function that finds the violations.
type check struct {
	name string
	rule string
	fix  string
	run  func(*repo) []finding
}

// checks are the conventions TestConventions guards; doc.go states them.
var checks = []check{
	{
		name: "PackageDoc",
		rule: "every package has a package doc comment starting \"Package NAME \" (\"Command \" for main), in exactly one file (a non-test file unless the package has only test files)",
		fix:  `write "// Package NAME ..." (or "// Command NAME ..." for a main package) directly above the package clause of one file, doc.go for a long one; delete the others`,
		run:  checkPackageDoc,
	},
	{
		name: "NoExit",
		rule: "only package main and TestMain end the process (and Example functions may log.Fatal): no os.Exit or log.Fatal* elsewhere",
		fix:  "return an error to the caller (main prints it and exits); a test helper process returns its exit code to TestMain, which calls os.Exit",
		run:  checkNoExit,
	},
	{
		name: "ErrorfWrap",
		rule: "in product code (not _test.go files, not files importing testing), fmt.Errorf formats an error argument with %w, so that errors.Is and errors.As see through it",
		fix:  "use %w (several are allowed); where the error must not be unwrapped, say why with a //lint:nowrap REASON comment on the call's line",
		run:  checkErrorfWrap,
	},
	{
		name: "PanicReason",
		rule: "product code (not _test.go files, not files importing testing) does not panic, except where the panic cannot happen, which a comment says",
		fix:  "return an error; or, when the panic is truly unreachable, put a comment starting with " + strconv.Quote(panicMarker) + " and saying why on the line of the panic or the line above",
		run:  checkPanicReason,
	},
	{
		name: "ReadmeLayout",
		rule: "README.md's Layout block names every directory under internal/, one line each, and nothing that does not exist",
		fix:  "edit the ``` block under \"## Layout\" in README.md: one line \"internal/NAME  what it holds\" per directory; fix or delete the lines of directories that moved or went",
		run:  checkReadmeLayout,
	},
	{
		name: "PackageNames",
		rule: "a package is named for what it provides: no " + strings.Join(vagueNames, ", ") + " packages",
		fix:  "name the package (and its directory) for the one thing it provides, or move each piece next to its users",
		run:  checkPackageNames,
	},
	{
		name: "ExportedDoc",
		rule: "every exported function, method of an exported type, type, constant and variable in a non-test file has a doc comment (a constant or variable may share its group's, or have one at the end of its line)",
		fix:  "write a comment starting with the name directly above the declaration: what it is or does, and the contract",
		run:  checkExportedDoc,
	},
	{
		name: "ContextFirst",
		rule: "a context.Context parameter comes first (after a test helper's *testing.T, *testing.B, *testing.F or testing.TB)",
		fix:  "move ctx context.Context to the front of the parameters",
		run:  checkContextFirst,
	},
}

// TestConventions walks the repository and reports every violation of
// the conventions doc.go states, with its file and line.
func TestConventions(t *testing.T) {
	r := theRepo(t)
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			report(t, c, c.run(r))
		})
	}
}

// report fails t with one line per finding, then the convention and how
// to fix it.
func report(t *testing.T, c check, fs []finding) {
	t.Helper()
	if len(fs) == 0 {
		return
	}
	var b strings.Builder
	for _, f := range fs {
		b.WriteString("\n\t" + f.String())
	}
	t.Errorf("%d violation(s) of the convention %q:%s\nconvention: %s\nfix: %s\n(internal/lint/doc.go states the conventions)",
		len(fs), c.name, b.String(), c.rule, c.fix)
}

// imports maps the names f refers to its imports by to their paths.
func imports(f *ast.File) map[string]string {
	m := map[string]string{}
	for _, imp := range f.Imports {
		p, err := strconv.Unquote(imp.Path.Value)
		if err != nil {
			continue
		}
		name := path.Base(p)
		if imp.Name != nil {
			name = imp.Name.Name
		}
		m[name] = p
	}
	return m
}

// pkgFunc returns the import path and name of a reference such as
// os.Exit, or "" when e is not a qualified identifier.
func pkgFunc(imps map[string]string, e ast.Expr) (pkg, name string) {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return "", ""
	}
	id, ok := sel.X.(*ast.Ident)
	if !ok {
		return "", ""
	}
	p, ok := imps[id.Name]
	if !ok {
		return "", ""
	}
	return p, sel.Sel.Name
}

// 1. Package doc comments.

// checkPackageDoc finds packages with no doc comment or with several,
// and doc comments that go doc never shows.
func checkPackageDoc(r *repo) []finding {
	type pkg struct {
		dir, name string
	}
	files := map[pkg][]*srcFile{}
	var order []pkg
	for _, f := range r.files {
		if strings.HasSuffix(f.pkgName(), "_test") {
			continue // an external test package documents nothing
		}
		k := pkg{f.dir, f.pkgName()}
		if files[k] == nil {
			order = append(order, k)
		}
		files[k] = append(files[k], f)
	}
	var out []finding
	for _, k := range order {
		var documented []*srcFile
		hasNonTest := false
		for _, f := range files[k] {
			if f.ast.Doc != nil && strings.TrimSpace(f.ast.Doc.Text()) != "" {
				documented = append(documented, f)
			}
			hasNonTest = hasNonTest || !f.test
		}
		first := files[k][0]
		switch {
		case len(documented) == 0:
			out = append(out, finding{r.position(first.ast.Package),
				fmt.Sprintf("package %s (%s) has no package doc comment", k.name, k.dir)})
		case len(documented) > 1:
			var names []string
			for _, f := range documented {
				names = append(names, path.Base(f.path))
			}
			for _, f := range documented[1:] {
				out = append(out, finding{r.position(f.ast.Doc.Pos()),
					fmt.Sprintf("package %s is documented in %d files (%s): keep one", k.name, len(documented), strings.Join(names, ", "))})
			}
		case hasNonTest && documented[0].test:
			f := documented[0]
			out = append(out, finding{r.position(f.ast.Doc.Pos()),
				fmt.Sprintf("the doc comment of package %s is in a test file, which go doc does not read: move it to a non-test file", k.name)})
		}
		if len(documented) > 0 {
			f := documented[0]
			want := "Package " + k.name + " "
			if k.name == "main" {
				want = "Command "
			}
			if text := f.ast.Doc.Text(); !strings.HasPrefix(text, want) {
				out = append(out, finding{r.position(f.ast.Doc.Pos()),
					fmt.Sprintf("the doc comment of package %s starts %q, not %q", k.name, firstWords(text), want)})
			}
		}
	}
	return out
}

// firstWords returns the start of a comment, for messages.
func firstWords(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 30 {
		s = s[:30] + "..."
	}
	return s
}

// vagueNames are package names that say nothing of what a package
// provides.
var vagueNames = []string{"util", "utils", "common", "helper", "helpers", "misc"}

// checkPackageNames finds packages, and directories of Go files, with a
// name from vagueNames.
func checkPackageNames(r *repo) []finding {
	var out []finding
	seen := map[string]bool{}
	for _, f := range r.files {
		name := strings.TrimSuffix(f.pkgName(), "_test")
		for _, n := range []string{name, path.Base(f.dir)} {
			if slices.Contains(vagueNames, n) && !seen[f.dir] {
				seen[f.dir] = true
				out = append(out, finding{r.position(f.ast.Name.Pos()), fmt.Sprintf("package %s in %s has a name that says nothing of what it provides", f.pkgName(), f.dir)})
			}
		}
	}
	return out
}

// 2. Exiting the process.

// exitFuncs are the functions that end the process, by import path.
var exitFuncs = map[string]map[string]bool{
	"os":  {"Exit": true},
	"log": {"Fatal": true, "Fatalf": true, "Fatalln": true},
}

// checkNoExit finds references to os.Exit and log.Fatal* outside package
// main, TestMain and Example functions.
func checkNoExit(r *repo) []finding {
	var out []finding
	for _, f := range r.files {
		if f.pkgName() == "main" {
			continue
		}
		imps := imports(f.ast)
		for _, d := range f.ast.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && f.test && fd.Recv == nil &&
				(fd.Name.Name == "TestMain" || strings.HasPrefix(fd.Name.Name, "Example")) {
				// TestMain owns the test binary's exit; an Example is
				// the body of a program's main, shown in the docs.
				continue
			}
			ast.Inspect(d, func(n ast.Node) bool {
				if p, name := pkgFunc(imps, asExpr(n)); exitFuncs[p][name] {
					out = append(out, finding{r.position(n.Pos()),
						fmt.Sprintf("%s.%s in package %s", path.Base(p), name, f.pkgName())})
				}
				return true
			})
		}
	}
	return out
}

// asExpr returns n as an expression, or nil.
func asExpr(n ast.Node) ast.Expr {
	e, _ := n.(ast.Expr)
	return e
}

// 3. Wrapping errors.

// nowrapMarker allows an error formatted with %v on its line.
const nowrapMarker = "//lint:nowrap"

// checkErrorfWrap finds fmt.Errorf calls that format an error with a verb
// other than %w. With no type information (golang.org/x/tools is not a
// dependency), an error is recognised by its name: err, e, a name ending
// in err or Err, a field so named, or a call of an Err method.
func checkErrorfWrap(r *repo) []finding {
	var out []finding
	for _, f := range r.files {
		if !f.product() {
			continue // a test's message may format a nil error, which %w cannot
		}
		imps := imports(f.ast)
		allowed := markedLines(r, f, nowrapMarker)
		ast.Inspect(f.ast, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) < 2 {
				return true
			}
			if p, name := pkgFunc(imps, call.Fun); p != "fmt" || name != "Errorf" {
				return true
			}
			format, ok := stringConst(call.Args[0])
			if !ok {
				return true
			}
			start, end := r.position(call.Pos()).Line, r.position(call.End()).Line
			for line := start; line <= end; line++ {
				if allowed[line] {
					return true
				}
			}
			for _, v := range formatVerbs(format) {
				i := v.arg + 1
				if i >= len(call.Args) || !strings.ContainsRune("vsq", v.verb) {
					continue
				}
				if name, ok := errorLike(call.Args[i]); ok {
					out = append(out, finding{r.position(call.Args[i].Pos()),
						fmt.Sprintf("fmt.Errorf formats the error %s with %%%c, not %%w", name, v.verb)})
				}
			}
			return true
		})
	}
	return out
}

// markedLines returns the lines of f holding a comment that starts with
// marker and gives a reason after it.
func markedLines(r *repo, f *srcFile, marker string) map[int]bool {
	lines := map[int]bool{}
	for _, g := range f.ast.Comments {
		for _, c := range g.List {
			if rest, ok := strings.CutPrefix(c.Text, marker); ok && strings.TrimSpace(rest) != "" {
				lines[r.position(c.Pos()).Line] = true
			}
		}
	}
	return lines
}

// stringConst returns the value of a string literal, or of a sum of them.
func stringConst(e ast.Expr) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(e.Value)
		return s, err == nil
	case *ast.BinaryExpr:
		if e.Op != token.ADD {
			return "", false
		}
		x, ok1 := stringConst(e.X)
		y, ok2 := stringConst(e.Y)
		return x + y, ok1 && ok2
	case *ast.ParenExpr:
		return stringConst(e.X)
	}
	return "", false
}

// A verb is one formatting directive: its verb and the index of the
// argument it formats, counted after the format.
type verb struct {
	verb rune
	arg  int
}

// formatVerbs parses a fmt format string the way fmt does: flags, an
// argument index [n], width and precision (each * takes an argument).
func formatVerbs(format string) []verb {
	var vs []verb
	arg := 0
	for i := 0; i < len(format); {
		if format[i] != '%' {
			i++
			continue
		}
		i++
		for i < len(format) && strings.IndexByte("+-# 0", format[i]) >= 0 {
			i++
		}
		// index parses an explicit argument index [n].
		index := func() {
			if i < len(format) && format[i] == '[' {
				if j := strings.IndexByte(format[i:], ']'); j > 0 {
					if n, err := strconv.Atoi(format[i+1 : i+j]); err == nil {
						arg = n - 1
					}
					i += j + 1
				}
			}
		}
		// number skips a width or precision, or takes an argument for *.
		number := func() {
			index()
			if i < len(format) && format[i] == '*' {
				arg++
				i++
				return
			}
			for i < len(format) && format[i] >= '0' && format[i] <= '9' {
				i++
			}
		}
		number()
		if i < len(format) && format[i] == '.' {
			i++
			number()
		}
		index()
		if i >= len(format) {
			break
		}
		c, size := utf8.DecodeRuneInString(format[i:])
		i += size
		if c == '%' {
			continue
		}
		vs = append(vs, verb{c, arg})
		arg++
	}
	return vs
}

// errorLike reports whether e names an error, by the names the tree gives
// errors, and returns how to call it in a message.
func errorLike(e ast.Expr) (string, bool) {
	isErrName := func(s string) bool {
		return s == "e" || s == "err" || s == "Err" || strings.HasSuffix(s, "Err") ||
			strings.HasSuffix(s, "err") && s != "stderr"
	}
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name, isErrName(e.Name)
	case *ast.SelectorExpr:
		return e.Sel.Name, e.Sel.Name != "Stderr" && isErrName(e.Sel.Name)
	case *ast.CallExpr:
		// x.Err() returns an error; x.Error() flattens one to a string.
		if sel, ok := e.Fun.(*ast.SelectorExpr); ok && (sel.Sel.Name == "Err" || sel.Sel.Name == "Error") && len(e.Args) == 0 {
			return sel.Sel.Name + "()", true
		}
	}
	return "", false
}

// 4. Panics.

// panicMarker starts the comment that says why a panic cannot happen.
const panicMarker = "unreachable:"

// checkPanicReason finds calls of panic in non-test files without a
// comment starting with panicMarker on their line or the line above.
func checkPanicReason(r *repo) []finding {
	var out []finding
	for _, f := range r.files {
		if !f.product() {
			continue
		}
		reasons := map[int]bool{}
		for _, g := range f.ast.Comments {
			for _, c := range g.List {
				text := strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(c.Text, "//"), "/*"))
				if strings.HasPrefix(text, panicMarker) {
					// The marker may start a comment of several lines:
					// it covers them all and the line after.
					reasons[r.position(c.Pos()).Line] = true
					for l := r.position(c.Pos()).Line; l <= r.position(g.End()).Line+1; l++ {
						reasons[l] = true
					}
				}
			}
		}
		ast.Inspect(f.ast, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			if id, ok := call.Fun.(*ast.Ident); !ok || id.Name != "panic" {
				return true
			}
			if line := r.position(call.Pos()).Line; !reasons[line] {
				out = append(out, finding{r.position(call.Pos()), "panic with no " + strconv.Quote("// "+panicMarker) + " comment saying why it cannot happen"})
			}
			return true
		})
	}
	return out
}

// 5. The README's layout.

// layoutHeading is the heading of README.md's section whose first code
// block lists the directories.
const layoutHeading = "## Layout"

// layoutEntries returns the paths the layout block of a README names, by
// line number, and the line of the block's opening ```.
func layoutEntries(readme string) (entries map[string][]int, start int, err error) {
	lines := strings.Split(readme, "\n")
	i := slices.IndexFunc(lines, func(l string) bool { return strings.TrimSpace(l) == layoutHeading })
	if i < 0 {
		return nil, 0, fmt.Errorf("no %q heading", layoutHeading)
	}
	for i++; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
		if strings.HasPrefix(lines[i], "## ") {
			return nil, 0, fmt.Errorf("no ``` block under %q", layoutHeading)
		}
	}
	if i == len(lines) {
		return nil, 0, fmt.Errorf("no ``` block under %q", layoutHeading)
	}
	start = i + 1
	entries = map[string][]int{}
	for i++; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
		if fields := strings.Fields(lines[i]); len(fields) > 0 && !unicode.IsSpace(rune(lines[i][0])) {
			p := strings.TrimSuffix(fields[0], "/")
			entries[p] = append(entries[p], i+1)
		}
	}
	if i == len(lines) {
		return nil, 0, fmt.Errorf("the ``` block under %q does not end", layoutHeading)
	}
	return entries, start, nil
}

// checkReadmeLayout compares the README's layout block with the
// directories under internal/.
func checkReadmeLayout(r *repo) []finding {
	at := func(line int) token.Position { return token.Position{Filename: "README.md", Line: line} }
	b, err := r.readFile("README.md")
	if err != nil {
		return []finding{{at(0), err.Error()}}
	}
	entries, start, err := layoutEntries(string(b))
	if err != nil {
		return []finding{{at(0), err.Error()}}
	}
	dirs, err := r.internalDirs()
	if err != nil {
		return []finding{{at(0), err.Error()}}
	}
	return compareLayout(entries, start, dirs, func(p string) bool {
		fi, err := os.Stat(filepath.Join(r.root, filepath.FromSlash(p)))
		return err == nil && fi.IsDir()
	})
}

// compareLayout reports the directories under internal/ the layout block
// misses, the paths it names that are not directories, and paths named
// twice.
func compareLayout(entries map[string][]int, start int, internal []string, isDir func(string) bool) []finding {
	at := func(line int) token.Position { return token.Position{Filename: "README.md", Line: line} }
	var out []finding
	for _, d := range internal {
		if _, ok := entries["internal/"+d]; !ok {
			out = append(out, finding{at(start),
				fmt.Sprintf("directory internal/%s is missing from the layout block: add a line \"internal/%s  what it holds\"", d, d)})
		}
	}
	var paths []string
	for p := range entries {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		lines := entries[p]
		if !isDir(p) {
			out = append(out, finding{at(lines[0]),
				fmt.Sprintf("the layout block names %s, which is not a directory (stale: moved or removed?): fix or delete the line", p)})
		}
		for _, l := range lines[1:] {
			out = append(out, finding{at(l), fmt.Sprintf("the layout block names %s again (first on line %d): keep one line", p, lines[0])})
		}
	}
	return out
}

// 6. Doc comments of exported names, and context first.

// checkExportedDoc finds exported functions, methods of exported types,
// types, constants and variables with no doc comment in the non-test
// files of packages other than main.
func checkExportedDoc(r *repo) []finding {
	var out []finding
	for _, f := range r.files {
		if f.test || f.pkgName() == "main" {
			continue
		}
		for _, d := range f.ast.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() || d.Doc != nil {
					continue
				}
				what := "function " + d.Name.Name
				if d.Recv != nil {
					recv := recvType(d.Recv.List[0].Type)
					if !ast.IsExported(recv) {
						continue
					}
					what = "method " + recv + "." + d.Name.Name
				}
				out = append(out, finding{r.position(d.Pos()), "exported " + what + " has no doc comment"})
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() && s.Doc == nil && d.Doc == nil {
							out = append(out, finding{r.position(s.Pos()), "exported type " + s.Name.Name + " has no doc comment"})
						}
					case *ast.ValueSpec:
						// A constant or variable may be documented by its
						// group's comment or by one at the end of its line.
						if s.Doc != nil || d.Doc != nil || s.Comment != nil {
							continue
						}
						for _, n := range s.Names {
							if n.IsExported() {
								out = append(out, finding{r.position(n.Pos()), "exported " + d.Tok.String() + " " + n.Name + " has no doc comment"})
							}
						}
					}
				}
			}
		}
	}
	return out
}

// recvType returns the name of a receiver's type.
func recvType(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.ParenExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// checkContextFirst finds function signatures (declarations, methods of
// interfaces, function types and fields) with a context.Context parameter
// that is not the first, or that follows anything but the *testing.T,
// *testing.B, *testing.F or testing.TB of a test helper. A function
// literal is left alone: its signature is the type it is passed as, which
// may be another module's.
func checkContextFirst(r *repo) []finding {
	var out []finding
	for _, f := range r.files {
		imps := imports(f.ast)
		var visit func(n ast.Node) bool
		visit = func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncLit:
				ast.Inspect(n.Body, visit)
				return false
			case *ast.FuncType:
				if p := misplacedContext(imps, n); p != nil {
					out = append(out, finding{r.position(p.Pos()), "context.Context is not the first parameter"})
				}
			}
			return true
		}
		ast.Inspect(f.ast, visit)
	}
	return out
}

// misplacedContext returns the context.Context parameter of ft that comes
// after a parameter other than a test's *testing.T, *testing.B,
// *testing.F or testing.TB, or nil.
func misplacedContext(imps map[string]string, ft *ast.FuncType) *ast.Field {
	if ft.Params == nil {
		return nil
	}
	before := false // a parameter that is not a test's comes before
	for _, field := range ft.Params.List {
		typ := field.Type
		if star, ok := typ.(*ast.StarExpr); ok {
			typ = star.X
		}
		p, name := pkgFunc(imps, typ)
		switch {
		case p == "context" && name == "Context":
			if before {
				return field
			}
		case p == "testing" && (name == "T" || name == "B" || name == "F" || name == "TB"):
		default:
			before = true
		}
	}
	return nil
}
