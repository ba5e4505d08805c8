// Package dirshape is the dirshape collector: bounded statistics of the
// shape of the kubelet's, the runtimes' and the CSI directories (entry
// counts, the largest directories, .deleting~ leftovers, ext4 nlink
// anomalies), walked in isolated workers with a budget of entries and
// never entering a mount mountprobe found hung.
//
// Its files are described in docs/bundle.md (dirshape/).
package dirshape

import "github.com/nodesnap/nodesnap/collectors"

// files is what the collector writes into its directory of the bundle
// (Spec.Files): docs/bundle.md's table is generated from it.
var files = []collectors.FileDoc{
	{Name: "shape.json", Holds: "entry counts, largest directories, `.deleting~` leftovers, nlink anomalies; each directory's `count` is `exact` or `lower_bound`, with its inode's `estimated_entries` when it was big enough to fill a read buffer"},
	{Name: "summary.txt", Holds: "the same as text"},
}
