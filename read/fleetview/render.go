package fleetview

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/nodesnap/nodesnap/internal/termsafe"
)

// WriteJSON writes the view as one JSON object.
func WriteJSON(w io.Writer, v *View) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// WriteText writes the view for a person: findings with their nodes, then
// the nodes that differ, then the bundles that could not be read.
func WriteText(w io.Writer, v *View) error {
	w = termsafe.NewWriter(w) // node names and findings come from bundles
	ok := 0
	for _, n := range v.Nodes {
		if n.Report != nil {
			ok++
		}
	}
	ew := &errWriter{w: w}
	ew.printf("%d bundles analysed in %s", ok, v.Dir)
	if len(v.Missing) > 0 {
		ew.printf(" (%d nodes have none)", len(v.Missing))
	}
	ew.printf("\n\n")
	if len(v.Findings) == 0 {
		ew.printf("No findings on any node.\n")
	} else {
		ew.printf("FINDINGS\n")
	}
	for _, g := range v.Findings {
		ew.printf("%-8s %s: %d of %d nodes\n", strings.ToUpper(g.Severity.String()), g.ID, len(g.Nodes), ok)
		ew.printf("         %s\n", g.Summary)
		ew.printf("         nodes: %s\n", listNodes(g.Nodes, 10))
	}
	if len(v.Differences) > 0 {
		ew.printf("\nNODES THAT DIFFER FROM THE REST\n")
		for _, d := range v.Differences {
			var parts []string
			if len(d.Has) > 0 {
				parts = append(parts, "only some nodes have "+strings.Join(d.Has, ", "))
			}
			if len(d.Lacks) > 0 {
				parts = append(parts, "lacks "+strings.Join(d.Lacks, ", ")+" (most nodes have it)")
			}
			parts = append(parts, d.Other...)
			ew.printf("  %s: %s\n", d.Node, strings.Join(parts, "; "))
		}
	}
	var bad []string
	for _, n := range v.Nodes {
		if n.Error != "" {
			bad = append(bad, fmt.Sprintf("  %s (%s): %s", n.Name, n.Bundle, n.Error))
		}
	}
	for _, n := range v.Missing {
		bad = append(bad, fmt.Sprintf("  %s: no bundle: %s", n.Name, n.Error))
	}
	if len(bad) > 0 {
		ew.printf("\nNOT ANALYSED\n%s\n", strings.Join(bad, "\n"))
	}
	if ok > 0 {
		ew.printf("\nDetails of one node: nodesnap analyze %s/BUNDLE\n", strings.TrimSuffix(v.Dir, "/"))
	}
	return ew.err
}

func listNodes(nodes []string, n int) string {
	if len(nodes) <= n {
		return strings.Join(nodes, ", ")
	}
	return strings.Join(nodes[:n], ", ") + fmt.Sprintf(" and %d more", len(nodes)-n)
}

type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}
