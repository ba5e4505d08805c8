package storageclients_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/engine/supervisor"
	"github.com/nodesnap/nodesnap/engine/supervisor/supervisortest"
)

// The collector over a sysfs and procfs tree laid out as the kernel lays
// them out for an iSCSI session in recovery with its disk, a multipath map
// over two SCSI disks, an rbd mapping and an NFS mount: `rbd showmapped`,
// the sessions with their portal and host, the maps with their slaves,
// without any of those programs (and without this machine having any of
// those devices).
func TestCollectorOnSysfsTree(t *testing.T) {
	sys, proc := t.TempDir(), t.TempDir()
	write := func(root, p, content string) {
		t.Helper()
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := func(p, target string) {
		t.Helper()
		full := filepath.Join(sys, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, full); err != nil {
			t.Fatal(err)
		}
	}
	// iSCSI: session3 on host2, its connection, its disk sdb (2:0:0:1).
	dev := "devices/platform/host2/session3"
	write(sys, dev+"/iscsi_session/session3/state", "FAILED\n")
	write(sys, dev+"/iscsi_session/session3/targetname", "iqn.2016-04.com.example:storage.lun1\n")
	write(sys, dev+"/iscsi_session/session3/recovery_tmo", "120\n")
	link("class/iscsi_session/session3", "../../"+dev+"/iscsi_session/session3")
	write(sys, dev+"/connection3:0/iscsi_connection/connection3:0/persistent_address", "10.0.0.9\n")
	write(sys, dev+"/connection3:0/iscsi_connection/connection3:0/persistent_port", "3260\n")
	link("class/iscsi_connection/connection3:0", "../../"+dev+"/connection3:0/iscsi_connection/connection3:0")
	write(sys, "devices/platform/host2/scsi_host/host2/state", "running\n")
	link("class/scsi_host/host2", "../../devices/platform/host2/scsi_host/host2")
	write(sys, "devices/platform/host2/iscsi_host/host2/ipaddress", "10.0.0.30\n")
	link("class/iscsi_host/host2", "../../devices/platform/host2/iscsi_host/host2")
	sdev := dev + "/target2:0:0/2:0:0:1"
	write(sys, sdev+"/state", "blocked\n")
	write(sys, sdev+"/block/sdb/dev", "8:16\n")
	write(sys, sdev+"/scsi_device/2:0:0:1/dev", "")
	link("class/scsi_device/2:0:0:1", "../../"+sdev+"/scsi_device/2:0:0:1")
	link("class/scsi_device/2:0:0:1/device", "../../../2:0:0:1")
	// Multipath dm-0 over sdc and sdd.
	for _, b := range []struct{ name, dev string }{{"sdb", "8:16"}, {"sdc", "8:32"}, {"sdd", "8:48"}, {"dm-0", "253:0"}} {
		write(sys, "block/"+b.name+"/dev", b.dev+"\n")
		write(sys, "block/"+b.name+"/inflight", "       0        0\n")
		write(sys, "block/"+b.name+"/stat", "1 0 8 0 2 0 16 0 0 1 1\n")
		write(sys, "block/"+b.name+"/queue/scheduler", "[mq-deadline] none\n")
	}
	write(sys, "block/dm-0/dm/name", "mpatha\n")
	write(sys, "block/dm-0/dm/uuid", "mpath-3600a098038303053453f463045727a4d\n")
	write(sys, "block/dm-0/dm/suspended", "0\n")
	write(sys, "block/dm-0/slaves/sdc", "")
	write(sys, "block/dm-0/slaves/sdd", "")
	write(sys, "block/sdc/holders/dm-0", "")
	// rbd 0: pool/image, no snapshot; config_info holds the key and is
	// never read.
	for k, v := range map[string]string{"pool": "replicapool", "pool_ns": "", "name": "csi-vol-1b2c", "current_snap": "-", "client_id": "client4161",
		"cluster_fsid": "8d2f3a1c-0b4e-4c5d-9e6f-7a8b9c0d1e2f", "major": "252", "minor": "0", "config_info": "10.0.0.11:6789 name=admin,secret=AQBSECRETSECRETSECRET== replicapool csi-vol-1b2c -"} {
		write(sys, "bus/rbd/devices/0/"+k, v+"\n")
	}
	// procfs: pid 1's mountstats and nfsfs.
	b, err := os.ReadFile(filepath.Join("testdata", "mountstats-procfs.txt"))
	if err != nil {
		t.Fatal(err)
	}
	write(proc, "1/mountstats", string(b[slices.Index(b, '-')+4:]))
	write(proc, "fs/nfsfs/servers", "NV SERVER   PORT USE HOSTNAME\nv4 c0a80101  801   1 192.168.1.1\n")
	write(proc, "fs/nfsfs/volumes", "NV SERVER   PORT DEV          FSID                              FSC\nv4 c0a80101  801 0:52         1:0                               no\n")

	c, _ := supervisortest.Run(t, supervisor.Options{Only: []string{"storageclients"}, Timeout: 30 * time.Second,
		Common: collectors.Common{Proc: proc, Sys: sys, ProbeTimeout: 3 * time.Second}})
	var rep layout.StorageClients
	supervisortest.Decode(t, c, layout.StorageClientsPath, &rep)
	for name, data := range c.Files {
		if strings.Contains(string(data), "AQBSECRETSECRETSECRET") {
			t.Errorf("the rbd key (config_info) is in %s", name)
		}
	}

	if len(rep.ISCSISessions) != 1 {
		t.Fatalf("sessions: %+v", rep.ISCSISessions)
	}
	s := rep.ISCSISessions[0]
	if s.State != "FAILED" || s.TargetName != "iqn.2016-04.com.example:storage.lun1" || s.Address != "10.0.0.9" || s.Port != "3260" ||
		s.RecoveryTMO != "120" || s.Host != "host2" || s.HostState != "running" || s.InitiatorAddr != "10.0.0.30" || !slices.Equal(s.Devices, []string{"sdb"}) {
		t.Errorf("session: %+v", s)
	}
	if len(rep.SCSIDevices) != 1 || rep.SCSIDevices[0].State != "blocked" || rep.SCSIDevices[0].Block != "sdb" || rep.SCSIDevices[0].Session != "session3" {
		t.Errorf("scsi devices: %+v", rep.SCSIDevices)
	}
	if len(rep.DM) != 1 || rep.DM[0].Name != "mpatha" || !rep.DM[0].Multipath || !slices.Equal(rep.DM[0].Slaves, []string{"sdc", "sdd"}) || rep.DM[0].Dev != "253:0" {
		t.Errorf("dm: %+v", rep.DM)
	}
	if len(rep.RBD) != 1 || rep.RBD[0].Pool != "replicapool" || rep.RBD[0].Image != "csi-vol-1b2c" || rep.RBD[0].Snap != "" || rep.RBD[0].ClientID != "client4161" || rep.RBD[0].Device != "/dev/rbd0" {
		t.Errorf("rbd: %+v", rep.RBD)
	}
	if len(rep.NFSMounts) != 1 || rep.NFSMounts[0].Server != "192.168.1.1" || len(rep.NFSServers) != 1 || len(rep.NFSVolumes) != 1 {
		t.Errorf("nfs: %+v %+v %+v", rep.NFSMounts, rep.NFSServers, rep.NFSVolumes)
	}
	if _, ok := c.Files["storageclients/raw/mountstats.txt"]; !ok {
		t.Errorf("raw mountstats not kept")
	}
	if rep.SampleIntervalMS != 0 || len(rep.Stuck) != 0 {
		t.Errorf("nothing waits here: interval %d, stuck %+v", rep.SampleIntervalMS, rep.Stuck)
	}
}
