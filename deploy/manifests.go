// Package deploy holds nodesnap's deployment files (Kubernetes manifests,
// systemd units, packaging scripts) and embeds the Kubernetes manifests
// in the binary, so that `nodesnap manifests rbac | kubectl apply -f -`
// works wherever the binary is, with no copy of the repository.
package deploy

import (
	"embed"
	"fmt"
	"sort"
	"strings"
)

//go:embed kubernetes/*.yaml
var kubernetes embed.FS

// Manifest is one embedded Kubernetes manifest.
type Manifest struct {
	Name string // as `nodesnap manifests` takes it: the file name without .yaml
	File string // its path in the repository
	Data []byte
}

// Manifests returns every embedded manifest, by name.
func Manifests() []Manifest {
	ents, _ := kubernetes.ReadDir("kubernetes")
	var out []Manifest
	for _, e := range ents {
		b, err := kubernetes.ReadFile("kubernetes/" + e.Name())
		if err != nil {
			continue
		}
		out = append(out, Manifest{Name: strings.TrimSuffix(e.Name(), ".yaml"), File: "deploy/kubernetes/" + e.Name(), Data: b})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Lookup returns the manifest named name (with or without .yaml, or its
// repository path).
func Lookup(name string) (Manifest, error) {
	name = strings.TrimSuffix(strings.TrimPrefix(name, "deploy/kubernetes/"), ".yaml")
	var names []string
	for _, m := range Manifests() {
		if m.Name == name {
			return m, nil
		}
		names = append(names, m.Name)
	}
	return Manifest{}, fmt.Errorf("no manifest %q: the manifests are %s", name, strings.Join(names, ", "))
}
