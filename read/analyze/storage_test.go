package analyze_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/read/analyze"
)

// The kernel's storage-client state names what does not answer, how many
// requests wait, and the pods on it.
func TestStorageClientFixtures(t *testing.T) {
	tests := []struct {
		fixture, id, subject string
		summary              []string
	}{{
		fixture: "storage-nfs-server-stuck", id: "nfs-server-stuck", subject: "nfs:10.0.0.5",
		summary: []string{"NFS server 10.0.0.5: 37 RPCs in flight", "not responding", "kubelet[4242]", "blocked for more than 14 min", "volumes of 3 pods"},
	}, {
		fixture: "storage-ceph-osd-mds-stuck", id: "ceph-requests-stuck", subject: "ceph:8d2f3a1c-0b4e-4c5d-9e6f-7a8b9c0d1e2f.client4161",
		summary: []string{"client4161", "6 OSD requests in flight (osd5: 3, osd7: 2, osd2: 1)", "2 MDS requests (mds0: 2)", "2 requests resent", "du[7001]", "volumes of 1 pod"},
	}, {
		fixture: "storage-iscsi-recovery", id: "iscsi-session-down", subject: "iscsi:session3",
		summary: []string{"iqn.2016-04.com.example:storage.lun1", "10.0.0.9:3260", "FAILED", "recovery_tmo 120 s", "sdb (blocked)", "volumes of 1 pod"},
	}, {
		fixture: "storage-multipath-all-failed", id: "multipath-all-paths-failed", subject: "253:0",
		summary: []string{"multipath mpatha (dm-0)", "all 2 paths failed", "sdc (offline)", "sdd (transport-offline)", "volumes of 1 pod"},
	}}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			r := analyzeFixture(t, tt.fixture)
			var f *analyze.Finding
			for i := range r.Findings {
				if r.Findings[i].ID == tt.id && r.Findings[i].Subject == tt.subject {
					f = &r.Findings[i]
				}
			}
			if f == nil {
				t.Fatalf("no %s finding about %s:\n%s", tt.id, tt.subject, dump(r))
			}
			if f.Severity != analyze.Critical {
				t.Errorf("severity %s", f.Severity)
			}
			wantIn(t, "summary", f.Summary, tt.summary...)
			if !strings.Contains(evidenceText(*f), "storageclients/state.json") {
				t.Errorf("evidence does not point at storageclients/state.json: %s", evidenceText(*f))
			}
			if len(f.Remediation) == 0 {
				t.Errorf("no remediation")
			}
			t.Logf("%s: %s", f.ID, f.Summary)
		})
	}
}

// A healthy node's storage state names nothing: RPCs in flight to an NFS
// server while no task waits on it and the kernel logs nothing, a
// multipath map with one path left.
func TestStorageClientHealthy(t *testing.T) {
	files := fixture(t, "storage-nfs-server-stuck")
	delete(files, "journal/kernel.log")
	var st map[string]any
	if err := json.Unmarshal(files["storageclients/state.json"], &st); err != nil {
		t.Fatal(err)
	}
	delete(st, "tasks")
	st["scsi_devices"] = []map[string]any{{"hctl": "3:0:0:0", "state": "running", "block": "sdc"}, {"hctl": "4:0:0:0", "state": "offline", "block": "sdd"}}
	st["dm"] = []map[string]any{{"block": "dm-0", "dev": "253:0", "name": "mpatha", "uuid": "mpath-x", "slaves": []string{"sdc", "sdd"}, "multipath": true}}
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	files["storageclients/state.json"] = b
	r := analyzeFiles(t, files)
	for _, id := range []string{"nfs-server-stuck", "multipath-all-paths-failed", "ceph-requests-stuck", "iscsi-session-down", "storage-stuck-in-kernel"} {
		if fs := findings(r, id); len(fs) > 0 {
			t.Errorf("healthy storage named %s: %s", id, fs[0].Summary)
		}
	}
}

// Without storageclients (an older bundle, or the collector skipped),
// the FUSE daemon of a hung mount is found among openfiles' /dev/fuse
// holders.
func TestHungFUSEDaemonFromOpenFiles(t *testing.T) {
	const mp = "/var/lib/kubelet/pods/5e1f0c2a-7b3d-4e8f-9a6b-1c2d3e4f5a6b/volumes/kubernetes.io~csi/pvc-1/mount"
	probes := `{"probes":[{"mountpoint":"` + mp + `","probe_path":"` + mp + `","namespaces":[4026531840],"probe_namespace":4026531840,` +
		`"mount_id":700,"fstype":"fuse.ceph-fuse","source":"ceph-fuse","dev":"0:61","root":"/","class":"fuse","result":"hung","probed":true,` +
		`"latency_ms":3000,"fuse":{"conn":61,"waiting_before":3}}],"counts":{"hung":1}}`
	procs := `{"pid":812,"comm":"ceph-fuse","mnt_ns":4026531840,"fds":[{"fd":3,"path":"/dev/fuse","kind":"device","dev":"0:5"}]}` + "\n" +
		`{"pid":900,"comm":"bash","mnt_ns":4026531840,"fds":[{"fd":0,"path":"/dev/pts/0","kind":"device","dev":"0:24"}]}` + "\n"
	r := analyzeFiles(t, map[string][]byte{"mountprobe/probes.json": []byte(probes), "openfiles/processes.jsonl": []byte(procs)})
	f := only(t, r, "hung-mount")
	wantIn(t, "summary", f.Summary, "its daemon ceph-fuse[812] (the only process holding /dev/fuse) does not answer", "5e1f0c2a-7b3d-4e8f-9a6b-1c2d3e4f5a6b")
}
