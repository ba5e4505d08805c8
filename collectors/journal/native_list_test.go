package journal

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/nodesnap/nodesnap/collectors/hostfs"
)

// An empty /var/log/journal (journald with volatile storage keeps one) is
// no problem to report, and files in a machine-id directory beside it are
// found: seen on a real node, where the empty directory made the journal
// collector partial with "listing /var/log/journal: EOF".
func TestListJournalFilesEmptyDirIsNoProblem(t *testing.T) {
	root := t.TempDir()
	empty := filepath.Join(root, "var/log/journal")
	run := filepath.Join(root, "run/log/journal/0123456789abcdef0123456789abcdef")
	for _, d := range []string{empty, run} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(run, "system.journal"), []byte("LPKSHHRH"), 0o640); err != nil {
		t.Fatal(err)
	}
	files, problems := hostfs.ListJournalFiles([]string{empty, filepath.Join(root, "run/log/journal")}, maxJournalFiles)
	if len(problems) != 0 {
		t.Errorf("problems %v, want none", problems)
	}
	if len(files) != 1 || filepath.Base(files[0]) != "system.journal" {
		t.Errorf("files %v, want the one system.journal", files)
	}
}
