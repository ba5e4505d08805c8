package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"sort"
	"strconv"
	"strings"

	"github.com/nodesnap/nodesnap/signatures/driverwords"
)

// nodeOps are the CSI node service's calls: the roots an error path is
// reached from.
var nodeOps = map[string]bool{
	"NodeStageVolume": true, "NodeUnstageVolume": true, "NodePublishVolume": true, "NodeUnpublishVolume": true,
	"NodeExpandVolume": true, "NodeGetVolumeStats": true,
}

// maxDepth is how many calls deep from a node operation a function still
// counts as on its path: deeper, a name shared by chance (a helper called
// Mount in two packages) would tie every function to every operation.
const maxDepth = 4

// errorBuilders are the packages whose calls build an error value.
var errorBuilders = map[string]bool{"fmt": true, "errors": true, "pkgerrors": true, "goerrors": true, "xerrors": true, "utilerrors": true}

var errorBuildFuncs = map[string]bool{"Errorf": true, "New": true, "Wrap": true, "Wrapf": true, "WithMessage": true, "WithMessagef": true}

// logFuncs are the error and warning calls of klog, logr, logrus, zap and
// the drivers' own log packages, by level.
var logFuncs = map[string]string{
	"Errorf": "error", "Error": "error", "ErrorS": "error", "ErrorLog": "error", "Errorw": "error", "ErrorDepth": "error", "ErrorfDepth": "error",
	"Warningf": "warning", "Warning": "warning", "WarningS": "warning", "WarningLog": "warning", "Warnf": "warning", "Warn": "warning", "Warnw": "warning",
}

type site struct {
	file, fn, kind, level, code, format string
	args                                []string
}

type extractor struct {
	fset   *token.FileSet
	files  []*ast.File
	rels   []string
	consts map[string]string
	// calls are the names each function (by name) calls.
	calls map[string]map[string]bool
	sites []site
}

func newExtractor() *extractor {
	return &extractor{fset: token.NewFileSet(), consts: map[string]string{}, calls: map[string]map[string]bool{}}
}

// parse reads one file: its string constants now, its calls when words
// runs (a format may name a constant of another file of the package).
func (x *extractor) parse(path, rel string) error {
	f, err := parser.ParseFile(x.fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		return fmt.Errorf("parsing %s: %w", rel, err)
	}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if i < len(vs.Values) {
					if v, ok := stringValue(vs.Values[i], nil); ok {
						x.consts[n.Name] = v
					}
				}
			}
		}
	}
	x.files = append(x.files, f)
	x.rels = append(x.rels, rel)
	return nil
}

// words walks every parsed file's functions, then keeps the sites of the
// functions a node operation reaches.
func (x *extractor) words(driver, version string) []driverwords.Word {
	for i, f := range x.files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			x.walkFunc(x.rels[i], fd)
		}
	}
	ops := x.reach()
	seen := map[string]bool{}
	var out []driverwords.Word
	for _, s := range x.sites {
		o := ops[s.fn]
		if len(o) == 0 {
			continue
		}
		w := driverwords.Word{Driver: driver, Version: version, Ops: o, Func: s.fn, File: s.file, Kind: s.kind, Level: s.level, Code: s.code, Format: s.format, Args: s.args}
		k := fmt.Sprintf("%q", []any{w.Ops, w.Func, w.File, w.Kind, w.Level, w.Code, w.Format, w.Args})
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, w)
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Func != b.Func {
			return a.Func < b.Func
		}
		return a.Format < b.Format
	})
	return out
}

// reach says, for each function name, the node operations that call it
// within maxDepth calls (the operation itself included).
func (x *extractor) reach() map[string][]string {
	sets := map[string]map[string]bool{}
	for op := range nodeOps {
		if x.calls[op] == nil {
			continue
		}
		depth := map[string]int{op: 0}
		queue := []string{op}
		for len(queue) > 0 {
			fn := queue[0]
			queue = queue[1:]
			if sets[fn] == nil {
				sets[fn] = map[string]bool{}
			}
			sets[fn][op] = true
			if depth[fn] == maxDepth {
				continue
			}
			for callee := range x.calls[fn] {
				if _, ok := depth[callee]; ok || x.calls[callee] == nil || nodeOps[callee] {
					continue
				}
				depth[callee] = depth[fn] + 1
				queue = append(queue, callee)
			}
		}
	}
	out := map[string][]string{}
	for fn, set := range sets {
		for op := range set {
			out[fn] = append(out[fn], op)
		}
		sort.Strings(out[fn])
	}
	return out
}

func (x *extractor) walkFunc(rel string, fd *ast.FuncDecl) {
	name := fd.Name.Name
	if x.calls[name] == nil {
		x.calls[name] = map[string]bool{}
	}
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		var callee, recv string
		switch fn := call.Fun.(type) {
		case *ast.Ident:
			callee = fn.Name
		case *ast.SelectorExpr:
			callee = fn.Sel.Name
			recv = receiverName(fn.X)
		default:
			return true
		}
		x.calls[name][callee] = true
		if s, ok := x.site(call, callee, recv); ok {
			s.file, s.fn = rel, name
			x.sites = append(x.sites, s)
		}
		return true
	})
}

// site says whether a call is an error path and what it says.
func (x *extractor) site(call *ast.CallExpr, callee, recv string) (site, bool) {
	var s site
	switch {
	case recv == "status" && (callee == "Error" || callee == "Errorf" || callee == "Newf" || callee == "New"):
		s.kind = "status"
		if len(call.Args) > 0 {
			if sel, ok := call.Args[0].(*ast.SelectorExpr); ok && receiverName(sel.X) == "codes" {
				s.code = sel.Sel.Name
			}
		}
	case errorBuilders[recv] && errorBuildFuncs[callee]:
		s.kind = "error"
	case logFuncs[callee] != "" && recv != "" && recv != "status" && !errorBuilders[recv] && recv != "t":
		s.kind, s.level = "log", logFuncs[callee]
	case codeArg(call) != "":
		// A driver's own helper that logs and returns a status error:
		// vsphere's logger.LogNewErrorCodef(log, codes.X, format, ...).
		s.kind, s.code = "status", codeArg(call)
	default:
		return s, false
	}
	idx := -1
	for i, a := range call.Args {
		if v, ok := stringValue(a, x.consts); ok {
			idx, s.format = i, v
			break
		}
	}
	if idx < 0 || !wording(s.format) {
		return s, false
	}
	for _, a := range call.Args[idx+1:] {
		e := types.ExprString(a)
		if len(e) > 80 {
			e = e[:80]
		}
		s.args = append(s.args, e)
	}
	return s, true
}

// codeArg is the gRPC code a call passes (codes.X), or "".
func codeArg(call *ast.CallExpr) string {
	for _, a := range call.Args {
		if sel, ok := a.(*ast.SelectorExpr); ok && receiverName(sel.X) == "codes" {
			return sel.Sel.Name
		}
	}
	return ""
}

// wording says whether a format says something: a few letters, not a bare
// "%v" or a key name.
func wording(f string) bool {
	letters := 0
	for _, r := range f {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			letters++
		}
	}
	return letters >= 6 && strings.ContainsAny(strings.TrimSpace(f), " :")
}

// receiverName is the package or variable a call is made on: "klog" of
// klog.V(4).ErrorS, "status" of status.Errorf.
func receiverName(x ast.Expr) string {
	for {
		switch e := x.(type) {
		case *ast.Ident:
			return e.Name
		case *ast.CallExpr:
			x = e.Fun
		case *ast.SelectorExpr:
			x = e.X
		default:
			return ""
		}
	}
}

// stringValue is the value of a string literal, a concatenation of them,
// or a constant of the package.
func stringValue(e ast.Expr, consts map[string]string) (string, bool) {
	switch v := e.(type) {
	case *ast.BasicLit:
		if v.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(v.Value)
		return s, err == nil
	case *ast.BinaryExpr:
		if v.Op != token.ADD {
			return "", false
		}
		a, ok1 := stringValue(v.X, consts)
		b, ok2 := stringValue(v.Y, consts)
		return a + b, ok1 && ok2
	case *ast.ParenExpr:
		return stringValue(v.X, consts)
	case *ast.Ident:
		s, ok := consts[v.Name]
		return s, ok
	}
	return "", false
}
