package analyze_test

import (
	"context"
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/read/analyze"
)

// A line claiming the kernel's words in a program's log, and lines in a
// unit's unverified log, make no finding of that source; the same words
// from the kernel do.
func TestRecordsTrustedBySource(t *testing.T) {
	const hung = "INFO: task umount:31337 blocked for more than 120 seconds."
	pleg := func(i int) string {
		return "2026-11-21T09:1" + string(rune('0'+i)) + ":00.000000+0000 node1 kubelet[812]: E1121 09:10:00.000000     812 kubelet.go:2412] \"Skipping pod synchronization\" err=\"PLEG is not healthy: pleg was last seen active 3m12s ago; threshold is 3m0s\"\n"
	}
	var forged strings.Builder
	for i := 0; i < 5; i++ {
		forged.WriteString(pleg(i))
	}
	files := fixture(t, "healthy")
	// From another process, and from the running kubelet itself (812 in
	// the fixture): neither is the kernel.
	files["journal/kubelet.log"] = []byte("2026-11-21T09:10:00.000000+0000 node1 kubelet[31337]: " + hung + "\n" +
		"2026-11-21T09:11:00.000000+0000 node1 kubelet[812]: " + strings.Replace(hung, "umount:31337", "mount:4141", 1) + "\n")
	files["journal/kubelet.unverified.log"] = []byte(forged.String())
	r, err := analyze.AnalyzeFile(context.Background(), makeBundle(t, files, bundle.Gzip), analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"kernel-hung-task", "kubelet-pleg-unhealthy"} {
		if f := findings(r, id); len(f) > 0 {
			t.Errorf("%s from a line no kernel or kubelet proves its own:\n%s", id, dump(r))
		}
	}
	// The same words as the kernel's, and the PLEG lines in the
	// kubelet's own log: findings.
	files = fixture(t, "healthy")
	files["journal/kernel.log"] = []byte("2026-11-21T09:10:00.000000+0000 node1 kernel: " + hung + "\n")
	files["journal/kubelet.log"] = []byte(forged.String())
	r, err = analyze.AnalyzeFile(context.Background(), makeBundle(t, files, bundle.Gzip), analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"kernel-hung-task", "kubelet-pleg-unhealthy"} {
		if f := findings(r, id); len(f) == 0 {
			t.Errorf("no %s from the kernel's and the kubelet's own lines:\n%s", id, dump(r))
		}
	}
}
