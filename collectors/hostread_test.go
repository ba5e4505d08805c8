package collectors_test

import (
	"go/ast"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// hostReads are the calls that open, stat, list or read a path. In a
// collector's process such a call on a host path can hang on a dead mount
// (or follow a symlink out of --root): host paths go through hostfs, which
// resolves them inside the root, skips mounts found hung and runs the
// operation in a worker under a deadline.
var hostReads = map[string][]string{
	"os":       {"Open", "OpenFile", "ReadFile", "Readlink", "Stat", "Lstat", "ReadDir", "DirFS", "Chdir", "Truncate"},
	"ioutil":   {"ReadFile", "ReadDir"},
	"unix":     {"Open", "Openat", "Openat2", "Stat", "Lstat", "Fstatat", "Statfs", "Statx", "Readlink", "Readlinkat", "Access", "Faccessat"},
	"syscall":  {"Open", "Openat", "Stat", "Lstat", "Statfs", "Readlink", "Access"},
	"filepath": {"Walk", "WalkDir", "Glob", "EvalSymlinks"},
}

// hostReadAllowed are the places outside hostfs and outside worker code
// that may make such a call, by file and function, each with its reason.
var hostReadAllowed = map[string]string{
	// The staging directory is nodesnap's own output, never a host path.
	"env.go:Create": "the staging directory",
}

// Host reads only through hostfs: no collector package (nor the
// framework) opens, stats, lists or reads a path itself, except in code
// that runs in an isolated worker (the functions its worker ops reach),
// in hostfs, and in the few places hostReadAllowed names. As
// engine/isolate's TestOnlyIsolateStartsProcesses holds os/exec, this
// holds the host-access rule of CONTRIBUTING.md.
func TestOnlyHostfsReadsTheHost(t *testing.T) {
	used := map[string]bool{}
	checked := 0
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if d.Name() == "testdata" || p == "hostfs" {
			return filepath.SkipDir
		}
		fset, files := parseDir(t, p)
		if len(files) == 0 {
			return nil
		}
		checked++
		worker := workerFuncs(files)
		for name, f := range files {
			rel := filepath.ToSlash(filepath.Join(p, name))
			imports := importNames(f)
			for _, decl := range f.Decls {
				fn, ok := decl.(*ast.FuncDecl)
				if !ok || fn.Body == nil {
					continue
				}
				if worker[fn.Name.Name] {
					continue
				}
				key := rel + ":" + fn.Name.Name
				ast.Inspect(fn.Body, func(n ast.Node) bool {
					call, ok := n.(*ast.CallExpr)
					if !ok {
						return true
					}
					pkg, fun, ok := pkgCall(call, imports)
					if ok && pkg == "isolate" && (fun == "RegisterOp" || fun == "Typed") {
						return false // an op given as a literal runs in a worker
					}
					if !ok || !isHostRead(pkg, fun) {
						return true
					}
					if _, ok := hostReadAllowed[key]; ok {
						used[key] = true
						return true
					}
					t.Errorf("%s: %s calls %s.%s; reach host paths through hostfs (env.Host(), or hostfs's /proc helpers), or do it in a worker op", fset.Position(call.Pos()), fn.Name.Name, pkg, fun)
					return true
				})
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 10 {
		t.Fatalf("checked only %d packages; is the walk rooted at collectors/?", checked)
	}
	var stale []string
	for k := range hostReadAllowed {
		if !used[k] {
			stale = append(stale, k)
		}
	}
	sort.Strings(stale)
	if len(stale) > 0 {
		t.Errorf("hostReadAllowed names places that no longer read the host; remove them: %v", stale)
	}
}

func isHostRead(pkg, fun string) bool {
	for _, f := range hostReads[pkg] {
		if f == fun {
			return true
		}
	}
	return false
}

// importNames maps a file's import names to the last element of their
// paths ("unix" for golang.org/x/sys/unix, "ioutil" for io/ioutil).
func importNames(f *ast.File) map[string]string {
	m := map[string]string{}
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		base := p[strings.LastIndex(p, "/")+1:]
		name := base
		if imp.Name != nil {
			name = imp.Name.Name
		}
		m[name] = base
	}
	return m
}

// pkgCall is a call of a package-level function of an imported package.
func pkgCall(call *ast.CallExpr, imports map[string]string) (pkg, fun string, ok bool) {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return "", "", false
	}
	x, ok := sel.X.(*ast.Ident)
	if !ok || x.Obj != nil {
		return "", "", false
	}
	base, ok := imports[x.Name]
	if !ok {
		return "", "", false
	}
	return base, sel.Sel.Name, true
}

// workerFuncs are the functions (and function literals, by position) of
// a package that run in an isolated worker: those given to
// isolate.RegisterOp (directly or through isolate.Typed), and every
// function of the package they call, transitively. Calls are matched by
// name, methods included: a package's own helper named like an op's
// callee counts as worker code too, which errs on the side of allowing.
func workerFuncs(files map[string]*ast.File) map[string]bool {
	calls := map[string][]string{} // function → functions it calls
	var roots []string
	decls := map[string]bool{}
	for _, f := range files {
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok {
				decls[fn.Name.Name] = true
			}
		}
	}
	for _, f := range files {
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				switch fun := call.Fun.(type) {
				case *ast.Ident:
					calls[fn.Name.Name] = append(calls[fn.Name.Name], fun.Name)
				case *ast.SelectorExpr:
					calls[fn.Name.Name] = append(calls[fn.Name.Name], fun.Sel.Name)
					if x, ok := fun.X.(*ast.Ident); ok && x.Name == "isolate" && (fun.Sel.Name == "RegisterOp" || fun.Sel.Name == "Typed") {
						for _, a := range call.Args {
							roots = append(roots, opFuncs(a)...)
						}
					}
				}
				return true
			})
		}
	}
	worker := map[string]bool{}
	var visit func(string)
	visit = func(name string) {
		if worker[name] || !decls[name] {
			return
		}
		worker[name] = true
		for _, c := range calls[name] {
			visit(c)
		}
	}
	for _, r := range roots {
		visit(r)
	}
	// Function literals given as ops: their callees are worker code.
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "isolate" || (sel.Sel.Name != "RegisterOp" && sel.Sel.Name != "Typed") {
				return true
			}
			for _, a := range call.Args {
				if lit, ok := a.(*ast.FuncLit); ok {
					ast.Inspect(lit.Body, func(n ast.Node) bool {
						if c, ok := n.(*ast.CallExpr); ok {
							switch fun := c.Fun.(type) {
							case *ast.Ident:
								visit(fun.Name)
							case *ast.SelectorExpr:
								visit(fun.Sel.Name)
							}
						}
						return true
					})
				}
			}
			return true
		})
	}
	return worker
}

// opFuncs are the named functions an argument of RegisterOp or Typed
// gives.
func opFuncs(e ast.Expr) []string {
	switch e := e.(type) {
	case *ast.Ident:
		return []string{e.Name}
	case *ast.CallExpr:
		var out []string
		for _, a := range e.Args {
			out = append(out, opFuncs(a)...)
		}
		return out
	}
	return nil
}
