package dirshape_test

import (
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/collectors/dirshape"
)

// The estimate from a directory's inode follows each filesystem's own
// accounting of a directory's size and link count.
func TestEstimateEntries(t *testing.T) {
	for _, tc := range []struct {
		desc           string
		magic          int64
		size           int64
		nlink          uint64
		avgName        float64
		entries, least uint64
		basis          string
	}{
		// 8+24 = 32-byte records in blocks three-quarters full.
		{"ext4, default name length", unix.EXT4_SUPER_MAGIC, 4096 * 1000, 2, 0, 96000, 0, "ext4 directory size 3.9 MiB, 24-byte names"},
		// 8-byte names: 16-byte records.
		{"ext4, short names read", unix.EXT4_SUPER_MAGIC, 1 << 20, 2, 8, 49152, 0, "8-byte names"},
		// Subdirectories counted by the link count win over a small size.
		{"ext4, links say more", unix.EXT4_SUPER_MAGIC, 4096, 1002, 0, 1000, 1000, ""},
		// dir_nlink: st_nlink 1 means past 64,998 subdirectories.
		{"ext4, link count overflowed", unix.EXT4_SUPER_MAGIC, 4096, 1, 0, 64999, 64999, "more than 64,998 subdirectories"},
		// 12+36 = 48-byte records, blocks 85% used.
		{"xfs", unix.XFS_SUPER_MAGIC, 1 << 20, 2, 36, 18568, 0, "xfs directory size 1.0 MiB"},
		// Twice the sum of the names' lengths.
		{"btrfs", unix.BTRFS_SUPER_MAGIC, 48000, 1, 24, 1000, 0, "btrfs"},
		// 20 bytes an entry, names or not.
		{"tmpfs", unix.TMPFS_MAGIC, 20000, 12, 90, 1000, 10, "tmpfs directory size 19.5 KiB"},
		// overlayfs' directory size says nothing.
		{"overlayfs", unix.OVERLAYFS_SUPER_MAGIC, 1 << 30, 2, 0, 0, 0, ""},
		{"negative size", unix.EXT4_SUPER_MAGIC, -5, 7, 0, 5, 5, ""},
	} {
		e := dirshape.EstimateEntries(tc.magic, tc.size, tc.nlink, tc.avgName)
		if e.Entries != tc.entries || e.AtLeast != tc.least || !strings.Contains(e.Basis, tc.basis) {
			t.Errorf("%s: got %d entries (at least %d), basis %q; want %d (at least %d), basis containing %q",
				tc.desc, e.Entries, e.AtLeast, e.Basis, tc.entries, tc.least, tc.basis)
		}
	}
}
