package deploy_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"text/template"

	"sigs.k8s.io/yaml"
)

// The krew manifest, once `make release` has filled its template (as
// release/cmd/mkrelease does, with the same fields), is one krew reads
// (its fields, strictly), installs the binary for Linux on amd64 and arm64
// from the release, and names the plugin so that kubectl runs it as
// kubectl-nodesnap (whose name the binary recognises).
func TestKrewManifest(t *testing.T) {
	tmpl, err := os.ReadFile(filepath.Join("krew", "nodesnap.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	type platform struct{ Arch, URI, SHA256 string }
	tp, err := template.New("krew").Option("missingkey=error").Parse(string(tmpl))
	if err != nil {
		t.Fatalf("krew/nodesnap.yaml is not a template: %v", err)
	}
	var filled bytes.Buffer
	base := "https://github.com/nodesnap/nodesnap/releases/download/v1.2.3/"
	err = tp.Execute(&filled, struct {
		SourceVersion, Version string
		Platforms              []platform
	}{"v1.2.3", "v1.2.3", []platform{
		{"amd64", base + "nodesnap-v1.2.3-linux-amd64.tar.gz", strings.Repeat("a", 64)},
		{"arm64", base + "nodesnap-v1.2.3-linux-arm64.tar.gz", strings.Repeat("b", 64)},
	}})
	if err != nil {
		t.Fatalf("filling krew/nodesnap.yaml: %v", err)
	}
	raw := filled.Bytes()
	var m struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			Version          string `json:"version"`
			Homepage         string `json:"homepage"`
			ShortDescription string `json:"shortDescription"`
			Description      string `json:"description"`
			Caveats          string `json:"caveats"`
			Platforms        []struct {
				Selector struct {
					MatchLabels map[string]string `json:"matchLabels"`
				} `json:"selector"`
				URI    string `json:"uri"`
				SHA256 string `json:"sha256"`
				Bin    string `json:"bin"`
			} `json:"platforms"`
		} `json:"spec"`
	}
	if err := yaml.UnmarshalStrict(raw, &m); err != nil {
		t.Fatalf("krew/nodesnap.yaml: %v", err)
	}
	if m.Spec.Version != "v1.2.3" {
		t.Errorf("version %q; want the one filled in", m.Spec.Version)
	}
	if m.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || m.Kind != "Plugin" || m.Metadata.Name != "nodesnap" {
		t.Errorf("%s %s %s: want a krew v1alpha2 Plugin named nodesnap (kubectl-nodesnap)", m.APIVersion, m.Kind, m.Metadata.Name)
	}
	if len(m.Spec.ShortDescription) > 60 || m.Spec.ShortDescription == "" || !strings.Contains(m.Spec.Description, "fleet collect") {
		t.Errorf("short description %q (one short line, as `kubectl krew search` shows it) or description without fleet collect", m.Spec.ShortDescription)
	}
	arches := map[string]bool{}
	for _, p := range m.Spec.Platforms {
		os, arch := p.Selector.MatchLabels["os"], p.Selector.MatchLabels["arch"]
		arches[os+"/"+arch] = true
		if p.Bin != "kubectl-nodesnap" || !strings.HasSuffix(p.URI, "/nodesnap-v1.2.3-"+os+"-"+arch+".tar.gz") || len(p.SHA256) != 64 {
			t.Errorf("%s/%s: bin %q uri %q sha256 %q", os, arch, p.Bin, p.URI, p.SHA256)
		}
	}
	if !arches["linux/amd64"] || !arches["linux/arm64"] || len(arches) != 2 {
		t.Errorf("platforms %v; want linux/amd64 and linux/arm64, the release's", arches)
	}
}
