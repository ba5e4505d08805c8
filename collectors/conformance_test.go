package collectors_test

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/nodesnap/nodesnap/collectors"
)

// The conventions every collector follows, checked over every registered
// collector (as sos's conformance tests check every plugin): a newcomer
// reads one collector and knows them all.

const modulePath = "github.com/nodesnap/nodesnap"

// listed returns the registered collectors a user sees.
func listed(t *testing.T) []*collectors.Spec {
	t.Helper()
	var out []*collectors.Spec
	for _, s := range collectors.All() {
		if !s.Hidden {
			out = append(out, s)
		}
	}
	if len(out) < 10 {
		t.Fatalf("only %d collectors registered; is collectors/all linked?", len(out))
	}
	return out
}

// runFunc is the package path and name of a collector's Run.
func runFunc(s *collectors.Spec) (pkg, name string) {
	full := runtime.FuncForPC(reflect.ValueOf(s.Run).Pointer()).Name()
	i := strings.LastIndex(full, "/")
	j := strings.Index(full[i+1:], ".")
	return full[:i+1+j], full[i+1+j+1:]
}

// pkgDir is the directory of a collector package, from this package's.
func pkgDir(t *testing.T, pkg string) string {
	t.Helper()
	rel, ok := strings.CutPrefix(pkg, modulePath+"/collectors/")
	if !ok {
		t.Fatalf("%s is not a package under collectors/", pkg)
	}
	return filepath.FromSlash(rel)
}

// parseDir parses the non-test Go files of a directory.
func parseDir(t *testing.T, dir string) (*token.FileSet, map[string]*ast.File) {
	t.Helper()
	fset := token.NewFileSet()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]*ast.File{}
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files[n] = f
	}
	return fset, files
}

// Run is a function named collect, the options type is Options, and the
// package doc is in doc.go (the only file with one).
func TestCollectorNamingAndDoc(t *testing.T) {
	for _, s := range listed(t) {
		pkg, name := runFunc(s)
		if name != "collect" {
			t.Errorf("%s: Run is %s.%s; name it collect", s.Name, pkg, name)
		}
		if s.Options != nil {
			typ := reflect.TypeOf(s.Options)
			if typ.Kind() != reflect.Pointer || typ.Elem().Kind() != reflect.Struct {
				t.Errorf("%s: Options is a %s, not a pointer to a struct", s.Name, typ)
			} else if typ.Elem().Name() != "Options" || typ.Elem().PkgPath() != pkg {
				t.Errorf("%s: the options type is %s.%s; name it Options, in the collector's package", s.Name, typ.Elem().PkgPath(), typ.Elem().Name())
			}
		}
		if s.Options != nil && s.Flags == nil {
			t.Errorf("%s: has options and no flags: the options cannot be set", s.Name)
		}
		if len(s.Files) == 0 {
			t.Errorf("%s: Files is empty; say what the collector writes", s.Name)
		}
		dir := pkgDir(t, pkg)
		_, files := parseDir(t, dir)
		doc, ok := files["doc.go"]
		if !ok || doc.Doc == nil || !strings.HasPrefix(doc.Doc.Text(), "Package "+doc.Name.Name+" ") {
			t.Errorf("%s: %s/doc.go holds no package doc (\"// Package %s is ...\")", s.Name, dir, filepath.Base(dir))
		}
		for n, f := range files {
			if n != "doc.go" && f.Doc != nil {
				t.Errorf("%s: %s/%s has a package doc too; keep it in doc.go", s.Name, dir, n)
			}
		}
	}
}

// After names collectors by their constant (collectors.MountprobeName,
// layout.Dir...), never by a string literal a rename would miss.
func TestCollectorAfterByConstant(t *testing.T) {
	for _, s := range listed(t) {
		for _, a := range s.After {
			if _, ok := collectors.Lookup(a); !ok {
				t.Errorf("%s: runs after %q, which is not a collector", s.Name, a)
			}
		}
		pkg, _ := runFunc(s)
		fset, files := parseDir(t, pkgDir(t, pkg))
		for _, f := range files {
			ast.Inspect(f, func(n ast.Node) bool {
				kv, ok := n.(*ast.KeyValueExpr)
				if !ok {
					return true
				}
				if k, ok := kv.Key.(*ast.Ident); !ok || k.Name != "After" {
					return true
				}
				ast.Inspect(kv.Value, func(n ast.Node) bool {
					if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
						t.Errorf("%s: After names %s as a literal at %s; use its constant (collectors.MountprobeName)", s.Name, lit.Value, fset.Position(lit.Pos()))
					}
					return true
				})
				return false
			})
		}
	}
}

// Options are declared once, with their defaults, in the options
// variable: registering the flags leaves them as they are, and every
// flag's default is the field itself (or the zero value), never a second
// copy of the default.
func TestCollectorOptionDefaultsDeclaredOnce(t *testing.T) {
	for _, s := range listed(t) {
		if s.Options == nil || s.Flags == nil {
			continue
		}
		before, _ := json.Marshal(s.Options)
		s.Flags(pflag.NewFlagSet(s.Name, pflag.ContinueOnError))
		after, _ := json.Marshal(s.Options)
		if string(before) != string(after) {
			t.Errorf("%s: registering the flags changes the options:\n before %s\n after  %s\nthe flags' defaults are not the declared ones", s.Name, before, after)
		}
		pkg, _ := runFunc(s)
		fset, files := parseDir(t, pkgDir(t, pkg))
		for _, f := range files {
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || len(call.Args) < 3 {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok || !strings.HasSuffix(sel.Sel.Name, "Var") || sel.Sel.Name == "Var" {
					// fs.Var(value, name, usage) takes its default
					// from the value itself.
					return true
				}
				addr, ok := call.Args[0].(*ast.UnaryExpr)
				if !ok || addr.Op != token.AND {
					return true
				}
				field := exprString(addr.X)
				def := call.Args[2]
				if exprString(def) == field || isZeroLit(def) {
					return true
				}
				t.Errorf("%s: flag %s at %s has its own default %s; declare it once, in the options variable, and pass %s", s.Name, exprString(call.Args[1]), fset.Position(call.Pos()), exprString(def), field)
				return true
			})
		}
	}
}

// Every option has a flag: each field that reaches the collector (its
// JSON form) is set by some flag of the collector.
func TestCollectorEveryOptionHasAFlag(t *testing.T) {
	for _, s := range listed(t) {
		if s.Options == nil {
			continue
		}
		if s.Flags == nil {
			t.Errorf("%s: has options and no flags", s.Name)
			continue
		}
		fields := jsonFields(t, s.Options)
		set := map[string]bool{}
		fs := pflag.NewFlagSet(s.Name, pflag.ContinueOnError)
		s.Flags(fs)
		base := jsonFields(t, s.Options)
		fs.VisitAll(func(f *pflag.Flag) {
			for _, v := range trialValues(f) {
				fresh := pflag.NewFlagSet(s.Name, pflag.ContinueOnError)
				s.Flags(fresh)
				if fresh.Set(f.Name, v) != nil {
					continue
				}
				changed := false
				for k, val := range jsonFields(t, s.Options) {
					if val != base[k] {
						set[k], changed = true, true
					}
				}
				if changed {
					break
				}
			}
		})
		s.Flags(pflag.NewFlagSet("reset", pflag.ContinueOnError))
		var missing []string
		for k := range fields {
			if !set[k] {
				missing = append(missing, k)
			}
		}
		sort.Strings(missing)
		if len(missing) > 0 {
			t.Errorf("%s: no flag sets the option(s) %v", s.Name, missing)
		}
	}
}

// jsonFields is an options struct as its JSON fields, each encoded.
func jsonFields(t *testing.T, opts any) map[string]string {
	t.Helper()
	b, err := json.Marshal(opts)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for k, v := range m {
		out[k] = string(v)
	}
	return out
}

// trialValues are values unlike a flag's default, to see which option it
// sets.
func trialValues(f *pflag.Flag) []string {
	switch f.Value.Type() {
	case "bool":
		if f.DefValue == "true" {
			return []string{"false"}
		}
		return []string{"true"}
	}
	vals := []string{"7", "9", "7s", "9s", "7MiB", "/conformance-a", "/conformance-b"}
	if n, err := strconv.Atoi(f.DefValue); err == nil {
		vals = append([]string{strconv.Itoa(n + 1)}, vals...)
	}
	return vals
}

func exprString(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return exprString(e.X) + "." + e.Sel.Name
	case *ast.BasicLit:
		return e.Value
	case *ast.StarExpr:
		return "*" + exprString(e.X)
	case *ast.ParenExpr:
		return exprString(e.X)
	default:
		return reflect.TypeOf(e).String()
	}
}

func isZeroLit(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name == "nil" || e.Name == "false"
	case *ast.BasicLit:
		return e.Value == `""` || e.Value == "0" || e.Value == "``"
	}
	return false
}
