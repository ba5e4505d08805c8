// Package all registers every collector: a binary (or test) that runs
// collectors imports it. Adding a collector is one line here.
package all

import (
	_ "github.com/nodesnap/nodesnap/collectors/cluster"
	_ "github.com/nodesnap/nodesnap/collectors/csi"
	_ "github.com/nodesnap/nodesnap/collectors/dirshape"
	_ "github.com/nodesnap/nodesnap/collectors/host"
	_ "github.com/nodesnap/nodesnap/collectors/journal"
	_ "github.com/nodesnap/nodesnap/collectors/kubelet"
	_ "github.com/nodesnap/nodesnap/collectors/mountprobe"
	_ "github.com/nodesnap/nodesnap/collectors/mounts"
	_ "github.com/nodesnap/nodesnap/collectors/nodeconfig"
	_ "github.com/nodesnap/nodesnap/collectors/openfiles"
	_ "github.com/nodesnap/nodesnap/collectors/processes"
	_ "github.com/nodesnap/nodesnap/collectors/runtime"
	_ "github.com/nodesnap/nodesnap/collectors/storageclients"
)
