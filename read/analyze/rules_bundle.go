package analyze

import (
	"fmt"
	"strings"
	"time"

	"github.com/nodesnap/nodesnap/bundle"
)

// The bundle itself: evidence that could not be read, and collectors that
// did not finish, so that no finding is never read as "healthy" when the
// evidence was missing.

const (
	idUnreadable = "unreadable-evidence"
	idIncomplete = "evidence-incomplete"
	idMissing    = "evidence-missing"
	idTruncated  = "bundle-truncated"
)

// What each finding of this file means, for docs/findings.md.
var _ = document(
	RuleDoc{
		ID: "unreadable-evidence", Severity: "info",
		Title:    "Evidence file could not be read",
		Meaning:  "A collector file is in the bundle but is not what its collector writes: cut short, corrupted, or from another nodesnap version. What was read before the error is used; the rules that need the rest could not check it, so their silence proves nothing.",
		Evidence: "The file itself, with the decoder's error.",
		Fix:      "Look at the file by hand (`tar -xOf BUNDLE PATH`); collect a new bundle if its area matters.",
	},
	RuleDoc{
		ID: "evidence-incomplete", Severity: "info",
		Title:    "Some evidence is incomplete",
		Meaning:  "Collectors timed out, failed or stopped early, so what they would have shown is partly missing: a finding absent from the report is not proof that all is well in their area. A collector that timed out often did so because something on the node hangs; the manifest records where.",
		Evidence: "`manifest.json`: the collectors' statuses, errors and hang evidence.",
		Fix:      "Read the collectors' errors (`nodesnap inspect -v BUNDLE`); collect again with a longer `--timeout` if they ran out of time.",
	},
	RuleDoc{
		ID: "evidence-missing", Severity: "info",
		Title:    "Evidence the run itself left out",
		Meaning:  "The run left evidence out, and says why, one finding per cause: the bundle size cap (`--max-bundle-size`) was reached, the global deadline (`--timeout`) cut collectors, the run was interrupted, or it ran without root (`--allow-non-root`). Rules that needed the missing files could not check.",
		Evidence: "`manifest.json`: `omitted`, the collectors cut by `--timeout`, `interrupted`, `warnings`.",
		Fix:      "Collect again without the limit: a larger `--max-bundle-size` (or `--only` the collectors that matter), a longer `--timeout`, to the end, or as root (`sudo nodesnap collect`).",
	},
	RuleDoc{
		ID: "bundle-truncated", Severity: "warning",
		Title:    "The bundle is truncated: the files after the cut are missing",
		Meaning:  "The archive ends before its end: the copy or upload that brought it was cut short (a half-uploaded attachment). Every file before the cut was read and the other findings come from them; the files after it never arrived, so a finding absent from the report is not proof that all is well in their area. The summary says where it ends (\"bundle truncated at entry X\") and how many files are missing.",
		Evidence: "`manifest.json`, read whole: the files it lists that the archive does not hold, and the entry cut short.",
		Fix:      "Ask for the bundle again: the copy on the node is whole (`nodesnap collect` printed its path, size and sha256 last). Check the new copy with `nodesnap validate BUNDLE` or `sha256sum`.",
	},
)

func ruleBundle(st *state) {
	ruleTruncated(st)
	for _, u := range st.unreadable {
		if st.truncated != nil && u.Path == st.truncated.Entry {
			continue // the cut, said once by bundle-truncated
		}
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
	ruleEvidenceMissing(st, m)
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
		Evidence:    []Evidence{{Path: bundle.ManifestName, What: "the collectors' statuses, errors and hang evidence", Record: recs}},
		Remediation: []string{"Read the collectors' errors (nodesnap inspect <bundle>); collect again with a longer --timeout if they ran out of time."},
	})
}

// ruleEvidenceMissing says, a finding per cause, what the run itself left
// out of the bundle: files past the size cap, collectors cut by the global
// --timeout, an interrupt, a run without root.
func ruleEvidenceMissing(st *state, m *bundle.Manifest) {
	var capped []string
	var capRec []bundle.Omitted
	for _, o := range m.Omitted {
		if strings.Contains(o.Reason, "size cap") {
			capped = append(capped, o.Path)
			if len(capRec) < 20 {
				capRec = append(capRec, o)
			}
		}
	}
	if len(capped) > 0 {
		st.add(Finding{
			ID: idMissing, Severity: Info, Title: "Evidence left out: the bundle size cap was reached",
			Subject: "size-cap",
			Summary: fmt.Sprintf("%s left out of the bundle by --max-bundle-size (%d bytes): %s",
				plural(len(capped), "file", "files"), m.Settings.MaxBundleBytes, listOf(capped, 3)),
			Explanation: "The run reached its cap on the bundle's size and left these files out. The rules that read them had nothing to read: " +
				"a finding absent from this report is not proof that all is well there.",
			Evidence:    []Evidence{{Path: bundle.ManifestName, What: "omitted", Record: capRec}},
			Remediation: []string{"Collect again with a larger --max-bundle-size (or --only the collectors that matter)."},
		})
	}
	var cut []string
	var cutRec []bundle.CollectorResult
	for _, c := range m.Collectors {
		if strings.HasPrefix(c.Error, "cut by --timeout") {
			cut = append(cut, c.Name+" "+c.Status)
			rc := c
			rc.Files = nil
			cutRec = append(cutRec, rc)
		}
	}
	if len(cut) > 0 {
		st.add(Finding{
			ID: idMissing, Severity: Info, Title: "Evidence missing: collectors cut by --timeout",
			Subject: "timeout",
			Summary: fmt.Sprintf("the run's global deadline (--timeout %s) cut %s: %s",
				time.Duration(m.Settings.TimeoutSeconds*float64(time.Second)), plural(len(cut), "collector", "collectors"), listOf(cut, 4)),
			Explanation: "These collectors did not get the time they needed: the run's global deadline ended them, or came before they could start. " +
				"What they would have collected is missing; what they said about the node after the cut is not evidence.",
			Evidence:    []Evidence{{Path: bundle.ManifestName, What: "the cut collectors", Record: cutRec}},
			Remediation: []string{"Collect again with a longer --timeout (the default is 2m)."},
		})
	}
	if m.Interrupted != nil {
		st.add(Finding{
			ID: idMissing, Severity: Info, Title: "Evidence missing: collection was interrupted",
			Subject: "interrupt",
			Summary: "collection was interrupted by " + m.Interrupted.Signal + " at " + m.Interrupted.At.Format(time.RFC3339) + "; collectors still running were stopped, later ones never ran",
			Explanation: "Someone (or something: a Job's deadline, systemd) stopped the run. The bundle holds what was gathered until then; " +
				"a collector marked interrupted was not hung.",
			Evidence:    []Evidence{{Path: bundle.ManifestName, What: "interrupted", Record: m.Interrupted}},
			Remediation: []string{"Collect again and let it finish (it ends within --timeout whatever the node's state)."},
		})
	}
	for _, w := range m.Warnings {
		if !strings.Contains(w, "not root") {
			continue
		}
		st.add(Finding{
			ID: idMissing, Severity: Info, Title: "Evidence missing: nodesnap did not run as root",
			Subject: "not-root",
			Summary: shorten(w, 200),
			Explanation: "The run was allowed without root (--allow-non-root). Files only root can read were not collected: other users' " +
				"processes, kernel stacks, mount namespaces, root-only logs. Rules that need them could not check.",
			Evidence:    []Evidence{{Path: bundle.ManifestName, What: "warnings", Record: w}},
			Remediation: []string{"Collect again as root: sudo nodesnap collect."},
		})
	}
}

// ruleTruncated: the archive ends early (a half-uploaded attachment, a
// copy cut short). What came before the cut was analysed; the rest is
// named from the manifest, so that no finding is read as "healthy" for
// evidence that never arrived.
func ruleTruncated(st *state) {
	te, m := st.truncated, st.manifest
	if te == nil || m == nil {
		return
	}
	var missing []string
	var missingBytes int64
	for _, f := range m.Files {
		if !st.listed[f.Path] || f.Path == te.Entry {
			missing = append(missing, f.Path)
			missingBytes += f.Size
		}
	}
	where := "after entry " + te.After
	subject := te.After
	switch {
	case te.Entry != "":
		where = fmt.Sprintf("at entry %s (%d of its %d bytes present)", te.Entry, te.Read, te.Size)
		subject = te.Entry
	case te.After == "":
		where = "right after manifest.json"
		subject = bundle.ManifestName
	}
	summary := fmt.Sprintf("bundle truncated %s: %s of the %d the manifest lists missing (%d bytes)",
		where, plural(len(missing), "file", "files"), len(m.Files), missingBytes)
	if len(missing) > 0 {
		summary += ", from " + missing[0]
	}
	what := "the files the manifest lists that the archive does not hold"
	if te.Entry != "" {
		what += "; " + te.Entry + " is cut short: the lines before the cut were read"
	}
	shown := missing
	if len(shown) > 50 {
		shown = shown[:50]
	}
	st.add(Finding{
		ID: idTruncated, Severity: Warning, Title: "The bundle is truncated: the files after the cut are missing",
		Subject: subject,
		Summary: summary,
		Explanation: "The archive ends before its end: the copy or upload that brought it here was cut short. Every file before the cut was read " +
			"and the findings above come from them; the files after it never arrived, so a finding absent from this report is not proof " +
			"that all is well in their area. The manifest (read whole) still says how the collection ended.",
		Evidence: []Evidence{{Path: bundle.ManifestName, What: what, Record: shown, More: len(missing) - len(shown)}},
		Remediation: []string{
			"Ask for the bundle again: the copy that was collected on the node (its path, size and sha256 were the last lines `nodesnap collect` printed) is whole.",
			"Check the new copy before reading it: nodesnap validate <bundle> (or sha256sum <bundle> against the sha256 printed at collection).",
		},
	})
}
