// Package runtime is the runtime collector: the container runtimes' own
// view of the node. It asks containerd and CRI-O over the CRI API and
// dockerd over its API for pods, containers (with their mounts), images
// and status, each call under its own deadline, takes goroutine dumps
// from their debug endpoints, and runs ctr, crictl and docker listings
// where those programs are installed.
//
// Its files are described in docs/bundle.md (runtime/).
package runtime

import "github.com/nodesnap/nodesnap/collectors"

// files is what the collector writes into its directory of the bundle
// (Spec.Files): docs/bundle.md's table is generated from it.
var files = []collectors.FileDoc{
	{Name: "summary.json", Holds: "every call, its deadline and outcome; whether each runtime's containers were listed"},
	{Name: "<runtime>/cri-*.json", Holds: "per runtime (`containerd/`, `crio/`) the CRI API's answers as JSON: `cri-version.json`, `cri-status.json` (conditions, configuration without registry credentials), `cri-pods.json`, `cri-containers.json`, `cri-container-status.json` (mounts, exit reasons), `cri-images.json`, `cri-imagefs.json`, `cri-container-stats.json`"},
	{Name: "docker/", Holds: "`containers.json` and `info.json` from dockerd's API"},
	{Name: "containerd/config.toml", Holds: "containerd's configuration, registry credentials removed"},
	{Name: "<runtime>/goroutine-debug2.txt", Holds: "containerd's and dockerd's goroutine dumps"},
	{Name: "<runtime>/<tool>-<listing>.txt", Holds: "`crictl`/`ctr`/`docker` listings where those programs are installed (`containerd/crictl-ps.txt`, `containerd/<namespace>/ctr-tasks.txt`, `docker/docker-ps.txt`, ...)"},
}
