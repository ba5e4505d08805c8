// Command extract builds the signature table from upstream source: it
// reads the Go files of the modules download.sh fetched (the module cache,
// never a copy in this repository), takes the format strings of the log,
// error and event calls in the parts of each that log volume and pod
// lifecycle trouble, classifies each with signatures.Classify, and writes
// the table (one row per format and version range) and the report of the
// formats no class took.
//
//	sh download.sh modules.txt > mods.txt
//	go run ./signatures/internal/extract -mods mods.txt -table signatures/table_gen.go -report signatures/unclassified.tsv
package main

import (
	"bufio"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/nodesnap/nodesnap/signatures"
)

// selected are the files and directories (relative to the module root,
// a trailing "/" for a directory tree) read for each source. Paths that
// do not exist in a version are skipped: the list spans every layout from
// kubelet 1.10 on.
var selected = map[string][]string{
	"kubelet": {
		"pkg/kubelet/volumemanager/", "pkg/volume/util/operationexecutor/", "pkg/volume/util/nestedpendingoperations/",
		"pkg/volume/util/util.go", "pkg/volume/util/subpath/", "pkg/util/mount/", "pkg/volume/csi/",
		"pkg/kubelet/kubelet_volumes.go", "pkg/kubelet/kubelet_pods.go", "pkg/kubelet/kubelet.go",
		"pkg/kubelet/pod_workers.go", "pkg/kubelet/pleg/", "pkg/kubelet/runtime.go", "pkg/kubelet/server/server.go", "pkg/kubelet/volumemanager/volume_manager.go", "pkg/kubelet/pluginmanager/",
		"pkg/kubelet/util/pluginwatcher/", "pkg/kubelet/kuberuntime/kuberuntime_manager.go",
		"pkg/kubelet/remote/", "pkg/kubelet/cri/remote/", "pkg/volume/util/hostutil/",
	},
	"mount-utils": {"mount/", "./"},
	"containerd": {
		"pkg/cri/server/container_remove.go", "pkg/cri/server/sandbox_remove.go", "pkg/cri/sbserver/container_remove.go",
		"internal/cri/server/container_remove.go", "internal/cri/server/sandbox_remove.go", "pkg/cri/server/sandbox_stop.go",
		"mount/", "core/mount/", "snapshots/overlay/", "plugins/snapshots/overlay/", "pkg/cri/server/helpers_linux.go",
		"internal/cri/server/podsandbox/", "pkg/cri/server/podsandbox/",
	},
	"cri-o":   {"server/container_remove.go", "server/sandbox_remove.go", "internal/storage/", "internal/lib/", "server/sandbox_stop_linux.go"},
	"dockerd": {"daemon/delete.go", "daemon/graphdriver/overlay2/", "daemon/container_operations_unix.go", "pkg/mount/", "layer/"},
	// CSI drivers: their node service (stage, publish, unpublish,
	// unstage) and the mount helpers it calls.
	"ceph-csi":       {"internal/rbd/nodeserver.go", "internal/rbd/rbd_attach.go", "internal/cephfs/nodeserver.go", "internal/csi-common/", "internal/util/idlocker.go", "internal/util/util.go", "pkg/rbd/nodeserver.go", "pkg/cephfs/nodeserver.go", "pkg/rbd/rbd_attach.go", "pkg/util/idlocker.go"},
	"longhorn":       {"csi/node_server.go", "csi/util.go"},
	"aws-ebs":        {"pkg/driver/node.go", "pkg/driver/node_linux.go", "pkg/mounter/"},
	"azuredisk":      {"pkg/azuredisk/nodeserver.go", "pkg/azuredisk/nodeserver_v2.go"},
	"gcp-pd":         {"pkg/gce-pd-csi-driver/node.go", "pkg/mount-manager/"},
	"vsphere":        {"pkg/csi/service/node.go", "pkg/csi/service/osutils/"},
	"topolvm":        {"driver/node.go", "internal/driver/node.go"},
	"csi-driver-nfs": {"pkg/nfs/nodeserver.go"},
	"csi-driver-smb": {"pkg/smb/nodeserver.go"},
	"hostpath":       {"pkg/hostpath/nodeserver.go", "pkg/hostpath/hostpath.go"},
}

// logFuncs are the call names whose first string argument is a format or
// message: klog/glog, logr, logrus, fmt/errors/status errors, events.
var logFuncs = map[string]string{
	"Errorf": "log", "Warningf": "log", "Infof": "log", "Warnf": "log", "Fatalf": "log", "Debugf": "log",
	"Error": "log", "Warning": "log", "Info": "log", "Warn": "log", "Debug": "log",
	"InfoS": "log", "ErrorS": "log", "InfoDepth": "log", "ErrorDepth": "log",
	"ErrorfDepth": "log", "WarningfDepth": "log",
	"Eventf": "event", "Event": "event", "AnnotatedEventf": "event",
	"New": "error", "Wrapf": "error", "Wrap": "error", "WithMessagef": "error",
	"GenerateErrorDetailed": "volume-op", "GenerateError": "volume-op", "GenerateMsgDetailed": "volume-op", "GenerateMsgSimple": "volume-op",
	"GenerateErrorSimple": "volume-op", "GenerateMsg": "volume-op",
}

// errorReceivers: for these packages Errorf builds an error, not a line.
var errorReceivers = map[string]bool{"fmt": true, "errors": true, "status": true, "pkgerrors": true, "goerrors": true}

type mod struct{ source, module, version, dir string }

type row struct {
	source, class, kind, format string
	keys                        []string
}

// rowKey is a row without its keys: what versions are merged by.
type rowKey struct{ source, class, kind, format string }

func main() {
	modsFile := flag.String("mods", "", "the output of download.sh: source module version dir, one a line")
	table := flag.String("table", "signatures/table_gen.go", "the Go file the table is written to")
	report := flag.String("report", "signatures/unclassified.tsv", "the report of formats no class took")
	flag.Parse()
	mods, err := readMods(*modsFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "extract:", err)
		os.Exit(1)
	}
	// versions of each source, in the order of the list.
	order := map[string][]string{}
	seen := map[rowKey]map[string]bool{}
	keysOf := map[rowKey][]string{}
	for _, m := range mods {
		v := shortVersion(m)
		order[m.source] = append(order[m.source], v)
		for _, r := range extract(m) {
			k := rowKey{r.source, r.class, r.kind, r.format}
			if seen[k] == nil {
				seen[k] = map[string]bool{}
			}
			seen[k][v] = true
			keysOf[k] = mergeKeys(keysOf[k], r.keys)
		}
	}
	var classified, unclassified []string
	var rows []signatures.Format
	for r, vs := range seen {
		ver := versionRanges(order[r.source], vs)
		if r.class == "" {
			unclassified = append(unclassified, fmt.Sprintf("%s\t%s\t%s\t%s", r.source, ver, r.kind, strconv.Quote(r.format)))
			continue
		}
		rows = append(rows, signatures.Format{Source: r.source, Versions: ver, Class: r.class, Kind: r.kind, Format: r.format, Keys: strings.Join(keysOf[r], ",")})
	}
	sort.Slice(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if a.Class != b.Class {
			return a.Class < b.Class
		}
		if a.Source != b.Source {
			return a.Source < b.Source
		}
		if a.Format != b.Format {
			return a.Format < b.Format
		}
		return a.Versions < b.Versions
	})
	sort.Strings(unclassified)
	var b strings.Builder
	b.WriteString("// Code generated by signatures/internal/extract (make signatures); DO NOT EDIT.\n\n")
	b.WriteString("package signatures\n\n")
	b.WriteString("// Sources are the upstream modules the table was extracted from.\n")
	b.WriteString("var Sources = []string{\n")
	for _, m := range mods {
		fmt.Fprintf(&b, "\t%q,\n", m.source+" "+m.module+"@"+m.version)
	}
	b.WriteString("}\n\n")
	b.WriteString("// Formats are the upstream format strings of every classified log,\n// error and event call, one row per format and version range.\n")
	b.WriteString("var Formats = []Format{\n")
	for _, r := range rows {
		classified = append(classified, r.Class)
		fmt.Fprintf(&b, "\t{Class: %q, Source: %q, Versions: %q, Kind: %q, Keys: %q,\n\t\tFormat: %s},\n", r.Class, r.Source, r.Versions, r.Kind, r.Keys, strconv.Quote(r.Format))
	}
	b.WriteString("}\n")
	if err := os.WriteFile(*table, []byte(b.String()), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "extract:", err)
		os.Exit(1)
	}
	hdr := "# Formats of the selected upstream files that no signature class took:\n# source\tversions\tkind\tformat. Review what is new; add a class in\n# signatures/classes.go when one names storage or pod-lifecycle trouble.\n"
	if err := os.WriteFile(*report, []byte(hdr+strings.Join(unclassified, "\n")+"\n"), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "extract:", err)
		os.Exit(1)
	}
	fmt.Printf("%d modules, %d classified formats (%d rows), %d unclassified\n", len(mods), len(classified), len(rows), len(unclassified))
}

func readMods(p string) ([]mod, error) {
	f := os.Stdin
	if p != "" {
		var err error
		if f, err = os.Open(p); err != nil {
			return nil, fmt.Errorf("reading the module list: %w", err)
		}
		defer f.Close()
	}
	var out []mod
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) != 4 {
			continue
		}
		out = append(out, mod{fs[0], fs[1], fs[2], fs[3]})
	}
	return out, sc.Err()
}

// shortVersion names a version in the table: the kubelet by its minor
// ("1.27"), the others by module and version.
func shortVersion(m mod) string {
	v := strings.TrimSuffix(strings.TrimPrefix(m.version, "v"), "+incompatible")
	if m.module == "k8s.io/kubernetes" {
		p := strings.Split(v, ".")
		return p[0] + "." + p[1]
	}
	if m.source == "mount-utils" {
		return strings.TrimPrefix(m.module, "k8s.io/") + "@" + v
	}
	return v
}

// versionRanges writes the versions (of all, in order) a row was seen in
// as runs: "1.10-1.19,1.22".
func versionRanges(all []string, in map[string]bool) string {
	var parts []string
	for i := 0; i < len(all); i++ {
		if !in[all[i]] {
			continue
		}
		j := i
		for j+1 < len(all) && in[all[j+1]] {
			j++
		}
		if j == i {
			parts = append(parts, all[i])
		} else {
			parts = append(parts, all[i]+"-"+all[j])
		}
		i = j
	}
	return strings.Join(parts, ",")
}

func mergeKeys(a, b []string) []string {
	for _, k := range b {
		found := false
		for _, x := range a {
			found = found || x == k
		}
		if !found {
			a = append(a, k)
		}
	}
	return a
}

// extract reads the selected files of one module.
func extract(m mod) []row {
	var out []row
	for _, sel := range selected[m.source] {
		root := filepath.Join(m.dir, sel)
		dirOnly := sel == "./"
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if d.IsDir() {
				if dirOnly && p != root {
					return filepath.SkipDir
				}
				if n := d.Name(); p != root && (n == "testing" || n == "testdata" || n == "fake" || n == "vendor") {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") || strings.Contains(p, "_windows") {
				return nil
			}
			out = append(out, extractFile(m.source, p)...)
			return nil
		})
	}
	return out
}

func extractFile(source, p string) []row {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil
	}
	consts := fileConsts(f)
	var out []row
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		kind, ok := logFuncs[sel.Sel.Name]
		recv := receiverName(sel.X)
		if sel.Sel.Name == "Errorf" && errorReceivers[recv] {
			kind, ok = "error", true
		}
		if (sel.Sel.Name == "New" || sel.Sel.Name == "Error") && errorReceivers[recv] {
			kind = "error"
		} else if sel.Sel.Name == "New" {
			return true
		}
		if !ok {
			return true
		}
		idx, format := -1, ""
		for i, a := range call.Args {
			if s, ok := stringValue(a, consts); ok {
				idx, format = i, s
				break
			}
		}
		if idx < 0 || len(strings.TrimSpace(format)) < 8 {
			return true
		}
		var keys []string
		if strings.HasSuffix(sel.Sel.Name, "S") || (kind == "log" && !strings.HasSuffix(sel.Sel.Name, "f") && len(call.Args) > idx+1) {
			for i := idx + 1; i+1 < len(call.Args); i += 2 {
				if s, ok := stringValue(call.Args[i], consts); ok && isKeyName(s) {
					keys = append(keys, s)
				} else {
					break
				}
			}
		}
		out = append(out, row{source: source, class: signatures.Classify(format), kind: kind, format: format, keys: keys})
		return true
	})
	return out
}

func isKeyName(s string) bool {
	if s == "" || len(s) > 40 {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r == '-' || r == '.' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// receiverName is the package or variable a call is made on: "klog" of
// klog.V(4).InfoS, "fmt" of fmt.Errorf.
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

// fileConsts are the string constants of a file, for formats named by a
// constant.
func fileConsts(f *ast.File) map[string]string {
	out := map[string]string{}
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
						out[n.Name] = v
					}
				}
			}
		}
	}
	return out
}

// stringValue is the value of a string literal, a concatenation of them,
// or a constant of the file.
func stringValue(e ast.Expr, consts map[string]string) (string, bool) {
	switch x := e.(type) {
	case *ast.BasicLit:
		if x.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(x.Value)
		return s, err == nil
	case *ast.BinaryExpr:
		if x.Op != token.ADD {
			return "", false
		}
		a, ok1 := stringValue(x.X, consts)
		b, ok2 := stringValue(x.Y, consts)
		return a + b, ok1 && ok2
	case *ast.ParenExpr:
		return stringValue(x.X, consts)
	case *ast.Ident:
		v, ok := consts[x.Name]
		return v, ok
	}
	return "", false
}
