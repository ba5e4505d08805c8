package analyze

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// RuleDoc documents one finding ID for the people who read findings:
// docs/findings.md is written from these (WriteFindingsDoc), so that a new
// rule is its rule file (with its RuleDoc next to it), its test and the
// regenerated page, nothing else.
type RuleDoc struct {
	ID string
	// Severity is the severity the finding is given, or the range
	// ("warning or critical") when the evidence decides.
	Severity string
	// Title says in a few words what is wrong.
	Title string
	// Meaning says what the finding means on the node and why it matters.
	Meaning string
	// Evidence names the bundle files (and what in them) the finding is
	// drawn from.
	Evidence string
	// Fix is what an operator does about it; the finding itself gives
	// the exact commands for the node in the bundle.
	Fix string
	// Incident names the incident or upstream issue it was made for, if
	// any.
	Incident string
}

var catalogue = map[string]RuleDoc{}

// document adds rule docs to the catalogue; rule files call it next to
// their IDs. An ID documented twice is a bug the tests catch.
func document(docs ...RuleDoc) bool {
	for _, d := range docs {
		if _, dup := catalogue[d.ID]; dup {
			panic("analyze: finding ID " + d.ID + " documented twice")
		}
		catalogue[d.ID] = d
	}
	return true
}

// Catalogue returns the documentation of every finding ID, by ID.
func Catalogue() []RuleDoc {
	out := make([]RuleDoc, 0, len(catalogue))
	for _, d := range catalogue {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// WriteFindingsDoc writes docs/findings.md: every finding ID with its
// meaning, evidence and fix.
func WriteFindingsDoc(w io.Writer) error {
	var b strings.Builder
	b.WriteString(`# Findings of nodesnap analyze

<!-- Generated from analyze's catalogue (read/analyze/rules_*.go) by
     go test ./read/analyze -run TestFindingsDocUpToDate -update; do not edit by hand. -->

` + "`nodesnap analyze BUNDLE`" + ` reports findings; each has an ID (below), a severity, a one-line
summary, the explanation, the evidence (bundle paths with the exact lines or records) and
the fix, with the commands for the node in the bundle. IDs are stable: scripts may match
on them (` + "`nodesnap analyze -o json BUNDLE | jq -r '.findings[].id'`" + `).

Severities: **critical**, the cause of an outage or data at risk; **warning**, something
wrong that needs a look; **info**, context, or evidence that is missing. A finding of
severity warning or critical makes ` + "`nodesnap analyze`" + ` exit with status 3.

| ID | severity | what |
| --- | --- | --- |
`)
	docs := Catalogue()
	for _, d := range docs {
		fmt.Fprintf(&b, "| [`%s`](#%s) | %s | %s |\n", d.ID, d.ID, d.Severity, d.Title)
	}
	for _, d := range docs {
		fmt.Fprintf(&b, "\n## %s\n\n**%s.** Severity: %s.", d.ID, d.Title, d.Severity)
		if d.Incident != "" {
			fmt.Fprintf(&b, " Made for: %s.", d.Incident)
		}
		fmt.Fprintf(&b, "\n\n%s\n\n**Evidence:** %s\n\n**Fix:** %s\n", d.Meaning, d.Evidence, d.Fix)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
