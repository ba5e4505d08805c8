package analyze

import (
	"fmt"
	"io"
	"strings"

	"github.com/nodesnap/nodesnap/internal/textfit"
)

// Explanation answers "why is this pod stuck?" for one pod from one
// node's report: the chain from its symptom to the node's findings, with
// evidence and fixes, or "nothing wrong found" with what was checked.
type Explanation struct {
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	Node      string `json:"node,omitempty"`
	Bundle    string `json:"bundle,omitempty"`
	// Verdict is explained, unexplained (a symptom no finding explains),
	// nothing-wrong, pod-not-on-node (the bundle's API view has no such
	// pod) or no-cluster-view (the bundle has no API view).
	Verdict string     `json:"verdict"`
	Message string     `json:"message"`
	Details *PodReport `json:"details,omitempty"`
	// NodeFindings are the node's warning and critical findings, for a
	// bundle without the API's view (nothing ties them to the pod).
	NodeFindings []string `json:"node_findings,omitempty"`
	// HostCommand collects the node from a shell on it, when it could not
	// be collected through the cluster.
	HostCommand string `json:"host_command,omitempty"`
}

// Verdicts of Explain.
const (
	VerdictExplained     = "explained"
	VerdictUnexplained   = "unexplained"
	VerdictNothingWrong  = "nothing-wrong"
	VerdictNotOnNode     = "pod-not-on-node"
	VerdictNoClusterView = "no-cluster-view"
	// Without a bundle, before any analysis: the pod has no node, or its
	// node could not be collected through the cluster.
	VerdictNotScheduled = "not-scheduled"
	VerdictNotCollected = "node-not-collected"
)

// Explain picks one pod out of a report.
func Explain(r *Report, namespace, name string) *Explanation {
	e := &Explanation{Namespace: namespace, Pod: name, Bundle: r.Bundle, Node: r.Hostname}
	if !r.ClusterView {
		e.Verdict = VerdictNoClusterView
		e.Message = "this bundle has no cluster view (its cluster collector did not run or had no credential), so nothing ties the node's findings to pods; the node's own findings follow"
		for i, f := range r.Findings {
			if f.Severity >= Warning {
				e.NodeFindings = append(e.NodeFindings, fmt.Sprintf("[%d] %s: %s", i+1, f.ID, f.Summary))
			}
		}
		return e
	}
	p, ok := r.PodByName(namespace, name)
	if !ok {
		e.Verdict = VerdictNotOnNode
		e.Message = fmt.Sprintf("the API's view in this bundle has no pod %s/%s bound to this node", namespace, name)
		return e
	}
	e.Details = p
	switch {
	case p.Symptom == "" && len(p.Chain) == 0:
		e.Verdict = VerdictNothingWrong
		e.Message = "nothing wrong found on the node for this pod"
	case p.Symptom == "":
		e.Verdict = VerdictExplained
		e.Message = "the pod looks well to the API, but node findings touch it"
	case p.Explained:
		e.Verdict = VerdictExplained
		e.Message = p.Symptom
	default:
		e.Verdict = VerdictUnexplained
		e.Message = p.Symptom + "; no node-side cause found in this bundle"
	}
	return e
}

// WriteExplainText writes an explanation for a person, at width columns
// (80 when 0); everything from the bundle goes through textfit, which
// escapes what a terminal would act on.
func WriteExplainText(w io.Writer, e *Explanation, width int) error {
	if width <= 0 {
		width = textfit.Default
	}
	fw := textfit.NewWriter(w, width, true)
	ew := &errWriter{w: fw}
	p := func(format string, a ...any) { _, _ = fmt.Fprintf(ew, format, a...) }
	p("pod %s/%s", e.Namespace, e.Pod)
	if e.Node != "" {
		p(" on node %s", e.Node)
	}
	p("\n")
	if e.Bundle != "" {
		p("bundle: %s\n", e.Bundle)
	}
	p("\n%s\n", wrap(e.Message, width, "", ""))
	if e.HostCommand != "" {
		p("\non the node itself (ssh, the cloud's serial console), run:\n    %s\n", e.HostCommand)
	}
	for _, f := range e.NodeFindings {
		p("%s\n", wrap("- "+f, width, "  ", "    "))
	}
	pr := e.Details
	if pr == nil {
		return flushBoth(ew, fw)
	}
	if pr.Owner != "" || pr.Phase != "" {
		p("\nphase %s%s\n", orUnknown(pr.Phase), map[bool]string{true: ", owned by " + pr.Owner, false: ""}[pr.Owner != ""])
	}
	for i, l := range pr.Chain {
		p("\n%s\n", wrap(fmt.Sprintf("← [%d] %s %s: %s", l.Index, strings.ToUpper(l.Severity.String()), l.Finding, l.Summary), width, "", "    "))
		if l.How != "" {
			p("%s\n", wrap("how it hurts the pod: "+l.How, width, "    ", "    "))
		}
		for _, ev := range l.Evidence {
			head := "evidence: " + ev.Path
			if ev.What != "" {
				head += " — " + oneLine(ev.What)
			}
			p("%s\n", wrap(head, width, "    ", "      "))
			for _, ln := range ev.Lines[:min(len(ev.Lines), 3)] {
				p("      %6d  %s\n", ln.N, textfit.Elide(ln.Text, width-14))
			}
		}
		if len(l.Fix) > 0 && (i == 0 || l.Finding != pr.Chain[0].Finding) {
			p("    fix:\n")
			for j, fx := range l.Fix {
				p("%s\n", wrap(fmt.Sprintf("%d. %s", j+1, fx), width, "      ", "         "))
			}
		}
	}
	if len(pr.Events) > 0 {
		p("\nthe API's warning events about the pod:\n")
		for _, ev := range pr.Events {
			p("%s\n", wrap("- "+ev, width, "  ", "    "))
		}
	}
	if len(pr.Missing) > 0 {
		p("\nmissing from this bundle, to explain it:\n")
		for _, m := range pr.Missing {
			p("%s\n", wrap("- "+m, width, "  ", "    "))
		}
	}
	p("\nchecked:\n")
	for _, c := range pr.Checked {
		p("%s\n", wrap("- "+c, width, "  ", "    "))
	}
	return flushBoth(ew, fw)
}
