package events

import "testing"

// ZFS names the pool it warns about; a suspended pool or an error is a
// failure of that pool's I/O, whatever the words around it.
func TestZFSPoolRecords(t *testing.T) {
	cases := []struct {
		name string
		line string
		ok   bool
		pool string
	}{
		{"a pool suspended, dmesg", `[  594.043099] WARNING: Pool 'zfs_pool_scsi0QEMU_QEMU_HARDDISK_disk11' has encountered an uncorrectable I/O failure and has been suspended.`, true, "zfs_pool_scsi0QEMU_QEMU_HARDDISK_disk11"},
		{"SPL's prefix before the warning", `[ 3143.768590] SPLError: 3525:0:(spl-err.c:67:vcmn_err()) WARNING: Pool 'tank' has encountered an uncorrectable I/O failure and has been suspended.`, true, "tank"},
		{"in the journal", `Nov 21 09:10:01 node1 kernel: WARNING: Pool 'data' has encountered an uncorrectable I/O failure and has been suspended; ` + "`zpool clear`" + ` will be required before the pool can be written to.`, true, "data"},
		{"the module loading is no failure", `[   43.350561] ZFS: Loaded module v0.7.1-1, ZFS pool version 5000, ZFS filesystem version 5`, false, ""},
		{"a pool named in a record without a failure", `[   50.000000] WARNING: Pool 'tank' has been imported`, false, ""},
	}
	for _, c := range cases {
		ev, check := parsedAs(t, c.name, c.line, c.ok)
		if !check {
			continue
		}
		if ev.Op != OpIO || ev.Outcome != OutcomeFailed || ev.Keys.Pool != c.pool || ev.Err.Errno != "EIO" {
			t.Errorf("%s: op %q outcome %v pool %q errno %q, want I/O failed %q EIO", c.name, ev.Op, ev.Outcome, ev.Keys.Pool, ev.Err.Errno, c.pool)
		}
		if kind, v := ev.Keys.Object(); kind != "ZFS pool" || v != c.pool {
			t.Errorf("%s: object %s %q, want ZFS pool %q", c.name, kind, v, c.pool)
		}
	}
}
