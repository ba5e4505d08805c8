package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/redact"
	"github.com/nodesnap/nodesnap/test/testkit"
)

// The holdout corpus (testdata/secrets-holdout) was gathered for issue 40
// from sources no rule of the redactor was written against: other secret
// scanners' own fixtures (trufflehog detector tests, detect-secrets plugin
// tests, ggshield's unit tests) and ceph-csi's configuration examples, each
// row naming the file it came from. The values are put in the node-side
// places and shapes they would be in (env files, units' Environment=,
// iscsid.conf, kubeconfigs, registry auth, CSI drivers' configuration and
// logs, daemons' journals, command lines, mount sources), and collected by
// the real binary.
//
// secrets.tsv: id kind place source value context; context is the text
// planted, with {V} standing for the value. keep.tsv: id place value
// context; value must come through, context (if any) is planted.
//
// Places: file:<path> (read by default), config:<path> (given with
// --config-file), cmdline (a running process's argv, split at spaces),
// journal:<identifier>, podlog:<container> (a CSI pod's CRI log), mount
// (the source of a tmpfs mount), ocienv (the environment of a CSI
// container's OCI config, read but never written). Rows of kind
// env-elsewhere are secrets a bundle holds bare, known for one only from
// such an environment.

type holdoutRow struct {
	id, kind, place, source, value, context string
}

func loadHoldout(t *testing.T) ([]holdoutRow, []holdoutRow) {
	t.Helper()
	dir := filepath.Join("testdata", "secrets-holdout")
	var secrets, keep []holdoutRow
	for _, f := range readTSV(t, filepath.Join(dir, "secrets.tsv"), 6) {
		r := holdoutRow{id: f[0], kind: f[1], place: f[2], source: f[3], value: tsvUnescape(f[4]), context: tsvUnescape(f[5])}
		if !strings.HasPrefix(r.source, "https://github.com/") || r.value == "" {
			t.Fatalf("secrets.tsv %s: a row needs its source URL and a value", r.id)
		}
		secrets = append(secrets, r)
	}
	for _, f := range readTSV(t, filepath.Join(dir, "keep.tsv"), 4) {
		keep = append(keep, holdoutRow{id: f[0], place: f[1], value: tsvUnescape(f[2]), context: tsvUnescape(f[3])})
	}
	return secrets, keep
}

// TestCollectSecretsHoldout plants the holdout corpus and collects it: no
// value may be anywhere in the bundle in any form, and all but at most 2
// of the values to keep come through.
func TestCollectSecretsHoldout(t *testing.T) {
	testkit.RequireRoot(t)
	secrets, keep := loadHoldout(t)
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "var/lib/kubelet/pods"), 0o755); err != nil {
		t.Fatal(err)
	}

	files := map[string]*bytes.Buffer{}
	var fileOrder, configFiles []string
	var argvs [][]string
	journal := map[string][]string{}
	podlogs := map[string]*bytes.Buffer{}
	var mounts, ociEnv []string
	const podDir = "kube-system_csi-holdoutplugin-7f9c2_4b6a8c0e-1d3f-4a5b-8c7d-9e0f1a2b3c4d"
	plant := func(place, text string) {
		kind, arg, _ := strings.Cut(place, ":")
		switch kind {
		case "file", "config":
			b, ok := files[arg]
			if !ok {
				b = &bytes.Buffer{}
				files[arg] = b
				fileOrder = append(fileOrder, arg)
				if kind == "config" {
					configFiles = append(configFiles, arg)
				}
			}
			b.WriteString(text + "\n")
		case "cmdline":
			argvs = append(argvs, strings.Fields(text))
		case "journal":
			journal[arg] = append(journal[arg], text)
		case "podlog":
			b, ok := podlogs[arg]
			if !ok {
				b = &bytes.Buffer{}
				podlogs[arg] = b
			}
			for _, line := range strings.Split(text, "\n") {
				fmt.Fprintf(b, "2026-12-07T10:00:%02d.000000000Z stderr F %s\n", b.Len()%60, line)
			}
		case "mount":
			mounts = append(mounts, text)
		case "ocienv":
			ociEnv = append(ociEnv, text)
		default:
			t.Fatalf("unknown place %q", place)
		}
	}
	for _, r := range secrets {
		plant(r.place, strings.ReplaceAll(r.context, "{V}", r.value))
	}
	for _, k := range keep {
		if k.context != "" {
			plant(k.place, k.context)
		}
	}

	for _, p := range fileOrder {
		dst := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, files[p].Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for c, b := range podlogs {
		dst := filepath.Join(root, "var/log/pods", podDir, c, "0.log")
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if len(ociEnv) > 0 {
		writeOCIConfig(t, root, ociEnv)
	}
	for _, argv := range argvs {
		startHeldProcess(t, argv)
	}
	for _, src := range mounts {
		mountWithSource(t, src)
	}
	j := testkit.StartJournald(t)
	idents := make([]string, 0, len(journal))
	for ident := range journal {
		idents = append(idents, ident)
	}
	sort.Strings(idents)
	var jargs []string
	for _, ident := range idents {
		for _, msg := range journal[ident] {
			j.Native(t, ident, msg)
		}
		j.WaitCount(t, "SYSLOG_IDENTIFIER="+ident, len(journal[ident]))
		jargs = append(jargs, "--journal-match", "SYSLOG_IDENTIFIER="+ident)
	}

	collect := func(extra ...string) (string, runResult) {
		out := t.TempDir()
		args := []string{"collect", "--output-dir", out, "--root", root, "--proc", "/proc", "--timeout", "100s",
			"--only", "nodeconfig,processes,journal,csi,mounts", "--journal-dir", j.Dir, "--journal-kernel=false"}
		for _, p := range configFiles {
			args = append(args, "--config-file", p)
		}
		r := runNodesnap(t, 150*time.Second, nil, append(append(args, jargs...), extra...)...)
		if r.code != exitOK && r.code != exitPartial {
			t.Fatalf("collect exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
		p := bundlePath(t, out)
		if d := os.Getenv("NODESNAP_CORPUS_BUNDLE_TO"); d != "" {
			if b, err := os.ReadFile(p); err == nil {
				_ = os.WriteFile(filepath.Join(d, "holdout-"+filepath.Base(p)), b, 0o600)
			}
		}
		return p, r
	}
	t.Run("collect", func(t *testing.T) {
		p, r := collect()
		checkHoldout(t, p, r, secrets, keep)
	})

	// nodesnap redact of a bundle collected with every rule off: the same
	// values in the shapes nodesnap writes must go as well, the last pass
	// over the whole bundle included. Values known only from what a
	// collection reads but does not write (a CSI container's OCI
	// environment) are not in such a bundle's reach.
	t.Run("redact", func(t *testing.T) {
		cfg := filepath.Join(t.TempDir(), "off.yaml")
		if err := os.WriteFile(cfg, []byte("disable: ["+strings.Join(redact.BuiltinRuleNames(), ", ")+"]\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		raw, _ := collect("--redact-config", cfg)
		var reach []holdoutRow
		for _, s := range secrets {
			if s.kind != "env-elsewhere" {
				reach = append(reach, s)
			}
		}
		clean := filepath.Join(t.TempDir(), "clean.tar.gz")
		rr := runNodesnap(t, 120*time.Second, nil, "redact", "--output-file", clean, raw)
		if rr.code != exitOK {
			t.Fatalf("nodesnap redact exit %d\nstdout:\n%s\nstderr:\n%s", rr.code, rr.stdout, rr.stderr)
		}
		checkHoldout(t, clean, rr, reach, keep)
	})
}

// writeOCIConfig writes, under root, the OCI config of a running CSI node
// plugin container (it mounts the kubelet's plugin registration
// directory) whose environment is env, where containerd keeps it.
func writeOCIConfig(t *testing.T, root string, env []string) {
	t.Helper()
	cfg := map[string]any{
		"ociVersion": "1.1.0",
		"process":    map[string]any{"args": []string{"/csi-holdoutplugin"}, "env": env},
		"mounts": []map[string]any{
			{"destination": "/registration", "source": "/var/lib/kubelet/plugins_registry", "type": "bind"},
			{"destination": "/csi", "source": "/var/lib/kubelet/plugins/holdout.csi.example.com", "type": "bind"},
		},
		"annotations": map[string]string{
			"io.kubernetes.cri.container-type":    "container",
			"io.kubernetes.cri.container-name":    "csi-plugin",
			"io.kubernetes.cri.sandbox-name":      "csi-holdoutplugin-7f9c2",
			"io.kubernetes.cri.sandbox-namespace": "kube-system",
			"io.kubernetes.cri.sandbox-uid":       "4b6a8c0e-1d3f-4a5b-8c7d-9e0f1a2b3c4d",
		},
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "run/containerd/io.containerd.runtime.v2.task/k8s.io/3f9a1c0e7b5d2a4c6e8f0a1b3c5d7e9f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// checkHoldout counts the values found in the bundle (in any form
// needleForms knows) and the values to keep that are gone.
func checkHoldout(t *testing.T, p string, r runResult, secrets, keep []holdoutRow) {
	t.Helper()
	c := mustValidate(t, p)
	_, mraw, err := readManifestRaw(p)
	if err != nil {
		t.Fatal(err)
	}
	everything := map[string][]byte{"(stdout)": []byte(r.stdout), "(stderr)": []byte(r.stderr), "manifest.json": mraw}
	for name, b := range c.Files {
		everything[name] = b
	}
	names := make([]string, 0, len(everything))
	for n := range everything {
		names = append(names, n)
	}
	sort.Strings(names)
	leakedValues := map[string]bool{}
	rows := 0
	for _, s := range secrets {
		found := findLeak(everything, names, s.value)
		if found != "" {
			rows++
			leakedValues[s.value] = true
			t.Errorf("leak %s (%s, %s): %s", s.id, s.kind, s.place, found)
		}
	}
	all := bytes.Join(func() [][]byte {
		var v [][]byte
		for _, n := range names {
			v = append(v, everything[n])
		}
		return v
	}(), []byte("\n"))
	lost := 0
	for _, k := range keep {
		if !bytes.Contains(all, []byte(k.value)) {
			lost++
			t.Logf("over-redaction: %s (%s): %q is gone", k.id, k.place, k.value)
		}
	}
	if lost > 2 {
		t.Errorf("%d of %d values to keep were changed or lost; at most 2 may be", lost, len(keep))
	}
	distinct := map[string]bool{}
	for _, s := range secrets {
		distinct[s.value] = true
	}
	t.Logf("holdout: %d of %d values leaked (%d of %d placements); %d of %d values to keep lost; %d redactions %v",
		len(leakedValues), len(distinct), rows, len(secrets), lost, len(keep), c.Manifest.Redaction.Total, c.Manifest.Redaction.Rules)
}

// mountWithSource mounts a small tmpfs whose source (the device field of
// mountinfo) is src, unmounted on cleanup.
func mountWithSource(t *testing.T, src string) {
	t.Helper()
	mp := t.TempDir()
	if err := unix.Mount(src, mp, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=1m"); err != nil {
		t.Fatalf("mount tmpfs with source %q: %v", src, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(mp, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", mp, err)
		}
	})
}
