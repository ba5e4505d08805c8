package analyze

import (
	"fmt"
	"strings"

	"github.com/nodesnap/nodesnap/bundle"
)

// The bundle itself: evidence that could not be read, and collectors that
// did not finish, so that no finding is never read as "healthy" when the
// evidence was missing.

const (
	idUnreadable = "unreadable-evidence"
	idIncomplete = "evidence-incomplete"
)

func ruleBundle(st *state) {
	for _, u := range st.unreadable {
		st.add(Finding{
			ID:       idUnreadable,
			Severity: Info,
			Title:    "Evidence file could not be read",
			Subject:  u.Path,
			Summary:  u.Path + " could not be decoded: " + shorten(firstLines(u.Err, 1), 200),
			Explanation: "The file is in the bundle but is not what its collector writes (cut short, corrupted, or from another nodesnap version). " +
				"What was read before the error is used; the rules that need the rest could not check it.",
			Evidence:    []Evidence{{Path: u.Path, What: u.Err}},
			Remediation: []string{"Look at the file by hand (tar -xOf <bundle> " + u.Path + "); collect a new bundle if it matters."},
		})
	}
	m := st.manifest
	if m == nil {
		return
	}
	var bad []string
	var recs []bundle.CollectorResult
	for _, c := range m.Collectors {
		switch c.Status {
		case bundle.StatusOK, bundle.StatusSkipped, bundle.StatusUnsupported:
			continue
		}
		what := c.Name + " " + c.Status
		if c.Error != "" {
			what += " (" + shorten(firstLines(c.Error, 1), 120) + ")"
		}
		bad = append(bad, what)
		rc := c
		rc.Files = nil
		recs = append(recs, rc)
	}
	if len(bad) == 0 && m.Interrupted == nil {
		return
	}
	summary := fmt.Sprintf("%s did not finish cleanly: %s", plural(len(bad), "collector", "collectors"), listOf(bad, 3))
	if m.Interrupted != nil {
		summary = "collection was interrupted by " + m.Interrupted.Signal + "; " + summary
	}
	st.add(Finding{
		ID:       idIncomplete,
		Severity: Info,
		Title:    "Some evidence is incomplete",
		Summary:  summary,
		Explanation: "These collectors timed out, failed or stopped early, so what they would have shown is partly missing: a finding absent from this report " +
			"is not proof that all is well in their area. A collector that timed out often did so because something on the node hangs: " +
			strings.TrimSpace("the manifest records where."),
		Evidence:    []Evidence{{Path: "manifest.json", What: "the collectors' statuses, errors and hang evidence", Record: recs}},
		Remediation: []string{"Read the collectors' errors (nodesnap inspect <bundle>); collect again with a longer --timeout if they ran out of time."},
	})
}
