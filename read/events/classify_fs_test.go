package events

import "testing"

// A kernel file system's record is read by its structure: "<FS>[-fs]
// [<level>] ([device ]<dev>): <what>" names the device; the level, or
// the words of an error in a record without one, say it failed; a mended
// error, an info record and a clean mount are no failure.
func TestFileSystemRecords(t *testing.T) {
	cases := []struct {
		line   string
		ok     bool
		device string
		errno  string
	}{
		{`[ 812.100001] BTRFS error (device nvme1n1p3): bdev /dev/nvme1n1p3 errs: wr 4, rd 0, flush 0, corrupt 0, gen 0`, true, "/dev/nvme1n1p3", ""},
		{`[Mon Jan  2 03:04:05 2023] BTRFS warning (device dm-3): direct IO failed ino 257 rw 0,0 sector 0x1000 len 4096 err no 10`, true, "/dev/dm-3", ""},
		{`Feb 01 10:00:00 node kernel: BTRFS: error (device sdc1) in btrfs_commit_transaction:2564: errno=-5 IO failure (Error while writing out transaction)`, true, "/dev/sdc1", "EIO"},
		{`[ 55.000000] EXT4-fs (sde1): error count since last fsck: 3`, true, "/dev/sde1", ""},
		{`[ 55.000000] EXT4-fs warning (device sde1): __ext4_read_dirblock:902: error reading directory block (ino 12, block 0)`, true, "/dev/sde1", ""},
		{`Mar 03 04:05:06 node kernel: XFS (rbd7): xfs_log_force: error -5 returned.`, true, "/dev/rbd7", "EIO"},
		{`[ 10.000000] XFS (vdc): Internal error xfs_iunlink_remove at line 2038 of file fs/xfs/xfs_inode.c.`, true, "/dev/vdc", ""},
		{`[ 10.000000] XFS (vdc): xfs_inactive_ifree: xfs_ifree returned error -117`, true, "/dev/vdc", "EUCLEAN"},
		{`[ 10.000000] F2FS-fs (mmcblk0p2): Magic Mismatch, valid(0xf2f52010) - read(0x0)`, false, "", ""},
		{`[ 10.000000] EXT4-fs (sdb): mounted filesystem with ordered data mode. Opts: (null)`, false, "", ""},
		{`[ 10.000000] XFS (sdb5): Ending clean mount`, false, "", ""},
		{`[ 10.000000] BTRFS info (device dm-2): read error corrected: ino 0 off 363982848 (dev /dev/mapper/storage2 sector 671992)`, false, "", ""},
		{`[ 10.000000] BTRFS error (device dm-15): fixed up error at logical 124463056945152 on dev /dev/dm-10 physical 408018681856`, false, "", ""},
		{`[ 10.000000] EXT4-fs warning (device mmcblk1p2): ext4_dirblock_csum_verify:406: inode #17677: comm podman: No space for directory leaf checksum. Please run e2fsck -D.`, false, "", ""},
		{`[ 10.000000] ACPI Error (device PNP0A08): AE_NOT_FOUND`, false, "", ""},
	}
	for _, c := range cases {
		ev, _ := NewParser(ref).Parse([]byte(c.line))
		failed := ev.Outcome == OutcomeFailed && ev.Op == OpIO && ev.Keys.Device == c.device
		if c.ok && !failed {
			t.Errorf("%s: op %q outcome %v device %q, want a failed I/O of %s", c.line, ev.Op, ev.Outcome, ev.Keys.Device, c.device)
			continue
		}
		if !c.ok && ev.Outcome == OutcomeFailed {
			t.Errorf("%s: read as a failure of %q (%+v)", c.line, ev.Keys.Device, ev)
		}
		if c.errno != "" && ev.Err.Errno != c.errno {
			t.Errorf("%s: errno %q, want %q", c.line, ev.Err.Errno, c.errno)
		}
	}
}

// The block layer's report of a failed request names its device
// whatever the status it failed with.
func TestBlockLayerRecords(t *testing.T) {
	cases := []struct {
		line, device, errno string
	}{
		{`[ 20.000001] critical target error, dev sdk, sector 1048576 op 0x1:(WRITE) flags 0x8800 phys_seg 1 prio class 2`, "/dev/sdk", ""},
		{`Apr 04 05:06:07 node kernel: blk_update_request: recoverable transport error, dev sdj, sector 2048`, "/dev/sdj", ""},
		{`[ 20.000002] timeout error, dev nvme2n1, sector 4096 op 0x0:(READ) flags 0x80700 phys_seg 1 prio class 0`, "/dev/nvme2n1", ""},
		{`[ 20.000003] blk_print_req_error: I/O error, dev dm-9, sector 77 op 0x0:(READ) flags 0x0 phys_seg 1 prio class 0`, "/dev/dm-9", "EIO"},
	}
	for _, c := range cases {
		ev, _ := NewParser(ref).Parse([]byte(c.line))
		if ev.Op != OpIO || ev.Outcome != OutcomeFailed || ev.Keys.Device != c.device || c.errno != "" && ev.Err.Errno != c.errno {
			t.Errorf("%s: op %q outcome %v device %q errno %q, want a failed I/O of %s", c.line, ev.Op, ev.Outcome, ev.Keys.Device, ev.Err.Errno, c.device)
		}
	}
	for _, l := range []string{
		`[ 20.000004] sd 2:0:0:0: [sdb] Attached SCSI disk`,
		`[ 20.000005] systemd[1]: Started Journal Service; no error, device ready`,
	} {
		if ev, _ := NewParser(ref).Parse([]byte(l)); ev.Outcome == OutcomeFailed {
			t.Errorf("%s: read as a failure (%+v)", l, ev)
		}
	}
}
