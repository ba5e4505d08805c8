// Package cluster is the cluster collector: the API server's view of the
// node being collected (its Node object, the pods bound to it, their
// claims and volumes, the VolumeAttachments and CSI objects of the node,
// the StorageClasses involved and the events about the node and its pods),
// so that analyze can join what users see ("pod stuck Terminating") to
// what the node shows (a mount held in another namespace).
//
// Its files are described in docs/bundle.md (cluster/).
package cluster

import "github.com/nodesnap/nodesnap/collectors"

// files is what the collector writes into its directory of the bundle
// (Spec.Files): docs/bundle.md's table is generated from it.
var files = []collectors.FileDoc{
	{Name: "objects.json", Holds: "the API server's view of this node as `layout.ClusterObjects` (the Node, the pods bound to it, their claims and volumes, the node's VolumeAttachments, CSINode, CSIDrivers, StorageClasses, events within `--since`; `missing` says what could not be read and why), each object trimmed to `layout`'s `Kube*` types as it is decoded (no annotations, environment, volume attributes or secret references). See [kubernetes.md](kubernetes.md#the-clusters-view-of-the-node-the-cluster-collector)"},
	{Name: "requests.json", Holds: "the server, `credential_source` and how its certificate was verified, every request with its status, pages and items (never a token)"},
}
