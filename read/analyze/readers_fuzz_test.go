package analyze

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/bundle"
)

// fuzzPaths are the bundle files the readers decode.
var fuzzPaths = []string{
	"processes/tasks.json", "mounts/mounts.json", "mounts/ns/4026531840.mountinfo", "openfiles/holders.json",
	"openfiles/processes.jsonl", "mountprobe/probes.json", "dirshape/shape.json", "csi/inventory.json",
	"kubelet/healthz.txt", "kubelet/pods.json", "kubelet/goroutine-debug2.txt", "runtime/docker/goroutine-debug2.txt",
	"journal/kubelet.log", "runtime/containerd/cri-pods.json", "kubelet/metrics.txt", "storageclients/state.json", "cluster/objects.json", "mounts/mountinfo.txt",
}

// FuzzReaders feeds arbitrary bytes straight to each reader (no archive
// in the way), then runs every rule over what it kept: no panic in a
// reader or a rule.
func FuzzReaders(f *testing.F) {
	for _, scn := range []string{"incident002-rbd-held-in-namespace", "incident003-cephfs-hung", "incident004-csi-published-lost", "incident001-huge-volume", "signatures", "kubelet-v1.34-restarted",
		"storage-nfs-server-stuck", "storage-ceph-osd-mds-stuck", "storage-iscsi-recovery", "storage-multipath-all-failed"} {
		for i, p := range fuzzPaths {
			b, err := os.ReadFile(filepath.Join("testdata", scn, filepath.FromSlash(p)))
			if err == nil {
				f.Add(uint8(i), b)
			}
		}
	}
	// The API's views of the cluster joins.
	views, _ := filepath.Glob(filepath.Join("testdata", "cluster", "*.json"))
	for _, v := range views {
		if b, err := os.ReadFile(v); err == nil {
			f.Add(uint8(slices.Index(fuzzPaths, "cluster/objects.json")), b)
		}
	}
	// mounts.json of format 2: a table shared by two namespaces.
	f.Add(uint8(slices.Index(fuzzPaths, "mounts/mounts.json")), []byte(mountsFormat2Seed))
	// Format 3: a device held in two copies, named by their table.
	f.Add(uint8(slices.Index(fuzzPaths, "mounts/mounts.json")), []byte(mountsFormat3Seed))
	// The tables file of the newer layout, from incident 002's two tables.
	if tables, err := tablesFromFixture("incident002-rbd-held-in-namespace"); err == nil {
		f.Add(uint8(len(fuzzPaths)-1), tables)
	}
	// Format 4: a table written as another's renumbered.
	f.Add(uint8(len(fuzzPaths)-1), []byte("==> mnt:[5] pid=1 tid=1 <==\n26 1 254:0 / / rw - ext4 /dev/vda rw\n27 26 7:3 / /mnt/held rw - ext4 /dev/loop3 rw\n"+
		"==> mnt:[6] pid=7 tid=7 same-as=5 ids=90+2 outside=89 <==\n==> mnt:[8] pid=9 tid=9 same-as=6 ids=1+1 <==\n"))
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		st := newState()
		st.manifest = &bundle.Manifest{SchemaVersion: bundle.SchemaVersion}
		p := fuzzPaths[int(which)%len(fuzzPaths)]
		// Twice, as two files of one bundle: a second copy exercises the
		// merging of what the first left.
		for _, name := range []string{p, strings.Replace(p, "4026531840", "4026532999", 1)} {
			if err := st.consume(context.Background(), bundle.Entry{Name: name, Size: int64(len(data)), Reader: bytes.NewReader(data)}); err != nil {
				t.Fatalf("consume: %v", err)
			}
		}
		for _, u := range st.unreadable {
			if strings.Contains(u.Err, "internal error") {
				t.Fatalf("%s: %s", p, u.Err)
			}
		}
		r := st.report()
		for _, fd := range r.Findings {
			if fd.ID == idInternalError {
				t.Fatalf("%s: %s\n%s", p, fd.Summary, fd.Evidence[0].What)
			}
		}
	})
}

// mountsFormat2Seed is a small mounts.json of format 2: one table, the
// host's namespace and a copy naming it with their own IDs.
const mountsFormat2Seed = `{"format":2,"host_namespace":1,"tables":[{"hash":"a","mounts":[{"mount_id":26,"parent_id":1,"major":254,"minor":0,"root":"/","mount_point":"/","options":["rw"],"propagation":{},"fs_type":"ext4","source":"/dev/vda","super_options":"rw","propagation_type":"private","class":"block"},` +
	`{"mount_id":27,"parent_id":26,"major":7,"minor":3,"root":"/","mount_point":"/mnt/held","options":["rw"],"propagation":{},"fs_type":"ext4","source":"/dev/loop3","super_options":"rw","propagation_type":"private","class":"block"}]}],` +
	`"namespaces":[{"inode":1,"host":true,"table":"a","mount_ids":[[26,1],[40,1]],"root_parents":[1],"processes":[]},{"inode":2,"table":"a","mount_ids":[[90,2]],"root_parents":[89],"processes":[{"pid":7,"comm":"x","threads":1}]}],"devices":[]}`

// mountsFormat3Seed is a small mounts.json of format 3: two copies of a
// namespace share a table, and the loop device mounted only there names
// them by it.
const mountsFormat3Seed = `{"format":3,"host_namespace":1,"tables":[{"hash":"a","mounts":[{"mount_id":26,"parent_id":1,"major":254,"minor":0,"root":"/","mount_point":"/","options":["rw"],"propagation":{},"fs_type":"ext4","source":"/dev/vda","super_options":"rw","propagation_type":"private","class":"block"},` +
	`{"mount_id":27,"parent_id":26,"major":7,"minor":3,"root":"/","mount_point":"/var/lib/kubelet/plugins/held","options":["rw"],"propagation":{},"fs_type":"ext4","source":"/dev/loop3","super_options":"rw","propagation_type":"private","class":"block"}]}],` +
	`"namespaces":[{"inode":1,"host":true,"processes":[],"mounts":[{"mount_id":20,"parent_id":1,"major":254,"minor":0,"root":"/","mount_point":"/","options":["rw"],"propagation":{"shared":1},"fs_type":"ext4","source":"/dev/vda","super_options":"rw","propagation_type":"shared","class":"block"}]},` +
	`{"inode":2,"table":"a","mount_ids":[[90,2]],"root_parents":[89],"processes":[{"pid":7,"comm":"x","threads":1}]},{"inode":3,"table":"a","mount_ids":[[95,2]],"root_parents":[94],"processes":[{"pid":8,"comm":"y","threads":1}]}],` +
	`"devices":[{"dev":"7:3","major":7,"minor":3,"sources":["/dev/loop3"],"fs_types":["ext4"],"class":"block","in_host_namespace":false,"only_outside_host_namespace":true,"namespaces":[],"tables":[{"table":"a","namespaces":[2,3]}]}]}`
