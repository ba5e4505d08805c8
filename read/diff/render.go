package diff

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nodesnap/nodesnap/internal/termsafe"
)

// Width is the text report's default line width.
const Width = 100

// maxListed bounds the items printed per section; --json has them all.
const maxListed = 30

// WriteJSON writes the diff as indented JSON.
func WriteJSON(w io.Writer, d *Diff) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(d); err != nil {
		return fmt.Errorf("writing the diff: %w", err)
	}
	return nil
}

// WriteText writes the diff for a reader, no line longer than width
// (Width when width < 40).
func WriteText(w io.Writer, d *Diff, width int) error {
	if width < 40 {
		width = Width
	}
	t := &textOut{width: width}
	t.line("old: %s", d.Old.Bundle)
	t.line("     %s, collected %s, %s", d.Old.Hostname, stamp(d.Old.CollectedAt), d.Old.Status)
	t.line("new: %s", d.New.Bundle)
	t.line("     %s, collected %s, %s", d.New.Hostname, stamp(d.New.CollectedAt), d.New.Status)
	if d.HostsDiffer {
		t.line("WARNING: the bundles come from different hosts (%s, %s): every difference below may", d.Old.Hostname, d.New.Hostname)
		t.line("         be one between two nodes, not a change of one node.")
	}
	if d.BootChanged {
		t.line("note: the node rebooted between the two collections (boot id changed).")
	}
	if d.ObfuscationDiffers {
		t.line("WARNING: the bundles were obfuscated differently (%s / %s): tokens do not compare.",
			orNone(d.Old.Obfuscated), orNone(d.New.Obfuscated))
	}
	if !d.Changed() {
		t.line("")
		t.line("Nothing noteworthy changed.")
		return t.flush(w)
	}
	if len(d.FindingsNew)+len(d.FindingsGone)+len(d.FindingsChanged) > 0 {
		t.section("Findings (analyze)")
		for _, f := range d.FindingsNew {
			t.item("+ %-8s %s %s", f.Severity, f.ID, subj(f.Subject))
		}
		for _, f := range d.FindingsChanged {
			t.item("~ %s→%s %s %s", f.Old, f.New, f.ID, subj(f.Subject))
		}
		for _, f := range d.FindingsGone {
			t.item("- %-8s %s %s", f.Severity, f.ID, subj(f.Subject))
		}
	}
	t.list("Hung mounts", d.HungNew, d.HungGone)
	t.list("Devices mounted only outside the host's mount namespace", d.ForeignDevicesNew, d.ForeignDevicesGone)
	if len(d.HostMountsAdded)+len(d.HostMountsRemoved) > 0 {
		t.section(fmt.Sprintf("Host mount table (%d added, %d removed)", len(d.HostMountsAdded), len(d.HostMountsRemoved)))
		var by []string
		for _, c := range d.HostMountsByType {
			s := c.FSType
			if c.Added > 0 {
				s += fmt.Sprintf(" +%d", c.Added)
			}
			if c.Removed > 0 {
				s += fmt.Sprintf(" -%d", c.Removed)
			}
			by = append(by, s)
		}
		t.item("by type: %s", strings.Join(by, ", "))
		t.mounts("+", d.HostMountsAdded)
		t.mounts("-", d.HostMountsRemoved)
	}
	t.list("Tasks in D state", d.DStateNew, d.DStateGone)
	if len(d.PodsAdded)+len(d.PodsRemoved)+len(d.PodPhaseChanges) > 0 {
		t.section("Pods")
		t.strings("+", d.PodsAdded)
		for _, c := range d.PodPhaseChanges {
			t.item("~ %s: %s → %s", c.Name, orAbsent(c.Old), orAbsent(c.New))
		}
		t.strings("-", d.PodsRemoved)
	}
	t.counts("Containers restarted (CRI attempt)", d.ContainerRestart)
	t.counts("Largest directories that grew (entries)", d.DirGrowth)
	t.counts(".deleting~ entries per dirshape root", d.DeletingChange)
	t.counts("Log signatures (lines, in each bundle's log window)", d.Signatures)
	if len(d.Signatures) > 0 && d.LogWindowDiffers {
		t.item("note: the log windows differ (--since %s and %s): counts are not per the same span",
			window(d.Old.LogWindowSeconds), window(d.New.LogWindowSeconds))
	}
	t.counts("Kubelet goroutines by first frame outside the standard library", d.Goroutines)
	if d.BundleStatus != nil || len(d.Collectors) > 0 {
		t.section("Collection")
		if d.BundleStatus != nil {
			t.item("~ bundle: %s → %s", d.BundleStatus.Old, d.BundleStatus.New)
		}
		for _, c := range d.Collectors {
			t.item("~ %s: %s → %s", c.Name, c.Old, c.New)
		}
	}
	if len(d.Versions) > 0 {
		t.section("Versions")
		for _, c := range d.Versions {
			t.item("~ %s: %s → %s", c.Name, orAbsent(c.Old), orAbsent(c.New))
		}
	}
	if len(d.Notes) > 0 {
		t.section("Not compared")
		for _, n := range d.Notes {
			t.item("%s", n)
		}
	}
	t.line("")
	if d.Worse {
		t.line("Worse: a warning or critical finding appeared (exit status 3).")
	} else {
		t.line("No new warning or critical finding.")
	}
	return t.flush(w)
}

type textOut struct {
	width int
	b     strings.Builder
}

// line writes one line; a longer one (a pod volume's mountpoint) is
// wrapped, the rest indented, so that nothing is cut.
func (t *textOut) line(format string, a ...any) {
	// One line, whatever the bundles hold: a value from them cannot
	// start another line or reach the terminal as a command.
	r := []rune(termsafe.Field(strings.TrimRight(fmt.Sprintf(format, a...), " ")))
	const indent = "      "
	first := true
	for {
		w := t.width
		if !first {
			w -= len(indent)
			t.b.WriteString(indent)
		}
		if len(r) <= w {
			t.b.WriteString(string(r) + "\n")
			return
		}
		t.b.WriteString(string(r[:w]) + "\n")
		r = r[w:]
		first = false
	}
}

func (t *textOut) section(title string) {
	t.line("")
	t.line("%s", title)
}

func (t *textOut) item(format string, a ...any) { t.line("  "+format, a...) }

func (t *textOut) strings(sign string, items []string) {
	for i, s := range items {
		if i == maxListed {
			t.item("%s … and %d more (--json lists all)", sign, len(items)-maxListed)
			return
		}
		t.item("%s %s", sign, s)
	}
}

func (t *textOut) list(title string, added, removed []string) {
	if len(added)+len(removed) == 0 {
		return
	}
	t.section(fmt.Sprintf("%s (%d new, %d gone)", title, len(added), len(removed)))
	t.strings("+", added)
	t.strings("-", removed)
}

func (t *textOut) mounts(sign string, ms []Mount) {
	for i, m := range ms {
		if i == maxListed {
			t.item("%s … and %d more (--json lists all)", sign, len(ms)-maxListed)
			return
		}
		t.item("%s %-10s %s", sign, m.FSType, m.Mountpoint)
	}
}

func (t *textOut) counts(title string, cs []CountChange) {
	if len(cs) == 0 {
		return
	}
	t.section(title)
	for i, c := range cs {
		if i == maxListed {
			t.item("… and %d more (--json lists all)", len(cs)-maxListed)
			return
		}
		t.item("%9s → %-9s %s", c.OldText(), c.NewText(), c.Name)
	}
}

func (t *textOut) flush(w io.Writer) error {
	if _, err := io.WriteString(w, t.b.String()); err != nil {
		return fmt.Errorf("writing the diff: %w", err)
	}
	return nil
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "unknown time"
	}
	return t.UTC().Format(time.RFC3339)
}

func window(sec float64) string {
	if sec <= 0 {
		return "unset"
	}
	return (time.Duration(sec) * time.Second).String()
}

func subj(s string) string {
	if s == "" {
		return ""
	}
	return "(" + s + ")"
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ",")
}
