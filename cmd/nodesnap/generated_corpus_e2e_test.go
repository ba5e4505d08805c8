package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/redact/corpusgen"
	"github.com/nodesnap/nodesnap/test/testkit"
)

// TestCollectGeneratedCorpus is TestCollectSecretsCorpus on a corpus made
// here rather than from anyone's examples: a value in the format of every
// rule of the scanner table compiled into the redactor, generated from the
// rule's own regex (redact/corpusgen), placed in every node context a
// collection reads (a file under /etc, journal entries, a CSI pod's CRI
// log, process command lines, the kubelet's /pods and /configz); and the
// scanner's own negative examples as values to keep. Nothing may leak;
// at most 2 values to keep may be lost, through collect and through
// nodesnap redact. The figures are logged.
func TestCollectGeneratedCorpus(t *testing.T) {
	testkit.RequireRoot(t)
	dir := t.TempDir()
	writeGeneratedCorpus(t, dir)
	collectCorpus(t, dir)
}

// writeGeneratedCorpus lays the generated corpus out as the secrets corpus
// is (see its README): secrets.tsv, keep.tsv and plant/.
func writeGeneratedCorpus(t *testing.T, dir string) {
	t.Helper()
	secrets, skipped := corpusgen.Generate(1)
	for _, s := range skipped {
		t.Logf("no value for %s", s)
	}
	keeps, _, err := corpusgen.Keeps()
	if err != nil {
		t.Fatal(err)
	}
	plant := filepath.Join(dir, "plant")
	write := func(rel, content string) {
		p := filepath.Join(plant, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	marker := func(loc string) string { return "secretslab-marker-" + loc }
	tsv := func(s string) string {
		return strings.NewReplacer(`\`, `\\`, "\t", `\t`, "\n", `\n`).Replace(s)
	}

	var rows, keepRows []string
	locs := []string{"gfile", "gjournal", "gcri", "gargv", "kpods", "kconfigz"}
	for i, s := range secrets {
		needle := s.Secret[s.Prefix:] // a kind's prefix (ghp_) may stay
		nj, _ := json.Marshal([]string{needle})
		for _, loc := range locs {
			rows = append(rows, strings.Join([]string{fmt.Sprintf("g%03d-%s", i, loc), s.Rule, loc, "0",
				"generated from the rule's regex", "", tsv(needle), string(nj)}, "\t"))
		}
	}
	for _, loc := range locs[:4] {
		keepRows = append(keepRows, strings.Join([]string{"mk-" + loc, "marker", loc, marker(loc)}, "\t"))
	}
	for i, k := range keeps {
		keepRows = append(keepRows, strings.Join([]string{fmt.Sprintf("neg%03d", i), "scanner-negative", "gfile", tsv(k.Value)}, "\t"))
	}
	write("../secrets.tsv", "id\tkind\tloc\ttemplate\tsource\tnote\tvalue\tneedles\n"+strings.Join(rows, "\n")+"\n")
	write("../keep.tsv", "id\tcategory\tloc\tvalue\n"+strings.Join(keepRows, "\n")+"\n")

	// A file nodeconfig collects, one value a line; the negative examples
	// after a neutral word.
	var file strings.Builder
	file.WriteString("# " + marker("gfile") + "\n")
	for _, s := range secrets {
		file.WriteString(s.Text + "\n")
	}
	for _, k := range keeps {
		file.WriteString("# sample value " + k.Value + " kept\n")
	}
	write("files/etc/default/kubelet", file.String())

	// Journal entries of an agent.
	var journal strings.Builder
	enc := func(ident, msg string) {
		b, _ := json.Marshal(map[string]string{"ident": ident, "msg": msg})
		journal.Write(append(b, '\n'))
	}
	enc("gen-agent", marker("gjournal"))
	for _, s := range secrets {
		enc("gen-agent", "sync failed, retrying with "+s.Text)
	}
	write("journal-gen.jsonl", journal.String())

	// A CSI driver pod's CRI log.
	var cri strings.Builder
	cri.WriteString("2026-11-28T08:00:00.000000000Z stdout F " + marker("gcri") + "\n")
	for i, s := range secrets {
		fmt.Fprintf(&cri, "2026-11-28T08:00:%02d.%09dZ stderr F %s\n", i%60, i, s.Text)
	}
	write("podlogs/kube-system_csi-genplugin-corpusgen_5e0c2a1b-7d3f-4c9a-8b6e-1f2a3b4c5d6e/csi-plugin/0.log", cri.String())

	// Command lines: ten values a process.
	var cmdlines strings.Builder
	for i := 0; i < len(secrets); i += 10 {
		argv := []string{fmt.Sprintf("/usr/local/bin/agent-%d", i/10), "--verbose"}
		if i == 0 {
			argv = append(argv, "--tag="+marker("gargv"))
		}
		for _, s := range secrets[i:min(i+10, len(secrets))] {
			argv = append(argv, s.Text)
		}
		b, _ := json.Marshal(argv)
		cmdlines.Write(append(b, '\n'))
	}
	write("cmdlines.jsonl", cmdlines.String())
	write("cmdlines-execa.txt", "agent-execa --verbose "+secrets[0].Text+"\n")
	write("holdfiles.txt", "")

	// The kubelet: a pod whose agent gets every value as an argument and
	// as an environment value, and a configuration listing them.
	var args []string
	var env []map[string]string
	for i, s := range secrets {
		args = append(args, s.Text)
		env = append(env, map[string]string{"name": fmt.Sprintf("AGENT_OPT_%d", i), "value": s.Text})
	}
	pods := map[string]any{"kind": "PodList", "apiVersion": "v1", "metadata": map[string]any{}, "items": []any{map[string]any{
		"metadata": map[string]any{"name": "agent-corpusgen", "namespace": "default", "uid": "6f1d3b2a-8e4c-4a7b-9c0d-2e3f4a5b6c7d"},
		"spec":     map[string]any{"containers": []any{map[string]any{"name": "agent", "image": "agent:1", "args": args, "env": env}}},
	}}}
	pb, _ := json.Marshal(pods)
	write("kubelet/pods.json", string(pb))
	cb, _ := json.Marshal(map[string]any{"kubeletconfig": map[string]any{"staticPodURL": "https://10.0.0.1/pods",
		"staticPodURLHeader": map[string]any{"X-Agent-Opts": args}}})
	write("kubelet/configz.json", string(cb))
	write("kubelet/token", "corpusgen-kubelet-test-token\n")
	write("kubelet/metrics.txt", "# TYPE up gauge\nup 1\n")
	write("kubelet/healthz.txt", "[-]syncloop failed\n")
	write("kubelet/goroutine-debug1.txt", "goroutine profile: total 1\n1 @ 0x1\n")
	write("kubelet/goroutine-debug2.txt", "goroutine 1 [running]:\nmain.main()\n\t/src/main.go:1 +0x1\n")
}
