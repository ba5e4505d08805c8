package analyze

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/nodesnap/nodesnap/bundle/layout"
)

// maxClusterBytes bounds cluster/objects.json as read: the collector caps
// what it keeps (pods, events), so a larger file is not nodesnap's.
const maxClusterBytes = 64 << 20

// maxClusterItems bounds each list of the cluster view the rules join.
const maxClusterItems = 5000

// readClusterObjects reads cluster/objects.json: the API server's view of
// the node (the cluster collector).
func (st *state) readClusterObjects(_ string, r io.Reader) error {
	b, err := io.ReadAll(io.LimitReader(r, maxClusterBytes+1))
	if err != nil {
		return err
	}
	if len(b) > maxClusterBytes {
		return fmt.Errorf("larger than %d bytes: not read", maxClusterBytes)
	}
	var o layout.ClusterObjects
	if err := json.Unmarshal(b, &o); err != nil {
		return err
	}
	trim := func(n int) int { return min(n, maxClusterItems) }
	o.Pods = o.Pods[:trim(len(o.Pods))]
	o.PVCs = o.PVCs[:trim(len(o.PVCs))]
	o.PVs = o.PVs[:trim(len(o.PVs))]
	o.VolumeAttachments = o.VolumeAttachments[:trim(len(o.VolumeAttachments))]
	o.Events = o.Events[:trim(len(o.Events))]
	st.cluster = &o
	// Names for pod UIDs, where the kubelet's own list is missing (no
	// kubelet token): the API names them too.
	st.apiPods = map[string]podRec{}
	for _, p := range o.Pods {
		if p.Metadata.UID != "" {
			st.apiPods[p.Metadata.UID] = podRec{UID: p.Metadata.UID, Namespace: p.Metadata.Namespace, Name: p.Metadata.Name,
				Phase: p.Status.Phase, Deleting: p.Metadata.DeletionTimestamp != nil}
		}
	}
	return nil
}
