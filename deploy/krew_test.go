package deploy_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The krew manifest is one krew reads (its fields, strictly), installs the
// binary for Linux on amd64 and arm64 from the release, and names the
// plugin so that kubectl runs it as kubectl-nodesnap (whose name the
// binary recognises).
func TestKrewManifest(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("krew", "nodesnap.yaml"))
	if err != nil {
		t.Fatal(err)
	}
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
		if p.Bin != "nodesnap" || !strings.HasSuffix(p.URI, "/nodesnap-VERSION-"+os+"-"+arch+".tar.gz") || p.SHA256 == "" {
			t.Errorf("%s/%s: bin %q uri %q sha256 %q", os, arch, p.Bin, p.URI, p.SHA256)
		}
	}
	if !arches["linux/amd64"] || !arches["linux/arm64"] || len(arches) != 2 {
		t.Errorf("platforms %v; want linux/amd64 and linux/arm64, the release's", arches)
	}
}
