// Package analyze reads a nodesnap bundle and names the causes of a
// node's storage trouble: the incidents of ../shared/incidents and the
// signatures listed there.
//
// The bundle is read in one streaming pass (bundle.WalkReader: nothing is
// extracted to disk, unsafe archives are refused). Each collector file
// goes to one reader (readers.go) that keeps only the facts the rules
// need; big files are decoded a record at a time, and log records are
// read into events (package events: operation, objects, error, outcome;
// opevents.go groups them) and matched against the signatures of logs.go.
// When the walk ends, the rules (rules_*.go, one file per family) join
// those facts into findings: one finding per cause, with the evidence from
// every collector that saw it. Rules are analyzers (analyzers.go) that
// require what they read (rule.reads in state.go) and run in any order the
// graph allows, each seeing the findings of what it requires only. Rules
// that join several collectors claim the log lines they use; the generic
// log rules require them and report only what no cause explained, and
// every failing storage operation no finding names is a finding of its
// own (rules_storage_ops.go), its severity from state.
//
// Finding IDs are stable. Each is documented next to its rule
// (document(RuleDoc{...}) in rules_*.go): what it means, its evidence and
// its fix; Catalogue returns them and docs/findings.md is generated from
// them (TestFindingsDocUpToDate), so that adding a rule touches its rule
// file, its test and the generated page only.
//
// Log lines count only when the running kubelet instance wrote them, in the
// collection window, about this node (scope.go), and mechanisms that depend
// on the kubelet's version say which version they assumed (kubeversion.go).
package analyze
