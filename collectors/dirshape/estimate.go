package dirshape

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// How many entries a directory holds, from its own inode: the size the
// filesystem gives a directory grows with its entries on ext4, xfs, btrfs
// and tmpfs, and its link count is 2 + its subdirectories (ext4 pins it at
// 1 past 64,998). One fstat answers, where reading the directory costs a
// getdents per few hundred entries and, on a cold cache, a disk read per
// block.

// dsDefaultNameLen is the name length assumed before any name was read:
// kubelet pod and volume directories are UUIDs or pvc-UUIDs (36-40
// bytes), runtimes' are 64-hex ids, files in a volume are shorter.
const dsDefaultNameLen = 24

// DirEstimate is what a directory's inode says of its size.
type DirEstimate struct {
	// Entries is the estimate; zero when the inode says nothing.
	Entries uint64
	// AtLeast is a certain lower bound, from the link count.
	AtLeast uint64
	// Basis says how Entries was worked out, for the reader.
	Basis string
}

// EstimateEntries estimates the entries of a directory on a filesystem of
// statfs type magic, with st_size size and st_nlink nlink. avgName is the
// mean length of names already read in it (0: none read yet).
func EstimateEntries(magic int64, size int64, nlink uint64, avgName float64) DirEstimate {
	var e DirEstimate
	if size < 0 {
		size = 0
	}
	if avgName <= 0 {
		avgName = dsDefaultNameLen
	}
	name := fmt.Sprintf("%.0f-byte names", avgName)
	var per float64 // bytes of st_size per entry
	switch magic {
	case unix.EXT4_SUPER_MAGIC:
		// ext2/3/4: a record is 8 bytes and the name, padded to 4; hashed
		// (htree) leaf blocks run about three-quarters full once they
		// split. A directory within one block is read for free anyway.
		per = float64(dsRoundUp(8+int(avgName+0.5), 4)) / 0.75
		e.Basis = "ext4 directory size " + dsBytes(size) + ", " + name
		switch {
		case nlink == 1:
			// dir_nlink: the count overflowed 65,000 links.
			e.AtLeast = nlinkLimit + 1
			e.Basis += ", st_nlink 1 (more than 64,998 subdirectories)"
		case nlink > 2:
			e.AtLeast = nlink - 2
		}
	case unix.XFS_SUPER_MAGIC:
		// xfs: the size covers the data blocks; a record is the inode
		// number (8), name length (1), name, file type (1) and tag (2),
		// padded to 8; blocks have a header and some free space.
		per = float64(dsRoundUp(12+int(avgName+0.5), 8)) / 0.85
		e.Basis = "xfs directory size " + dsBytes(size) + ", " + name
		if nlink > 2 {
			e.AtLeast = nlink - 2
		}
	case unix.BTRFS_SUPER_MAGIC:
		// btrfs: a directory's size is twice the sum of its names'
		// lengths (one DIR_ITEM and one DIR_INDEX each); st_nlink is 1.
		per = 2 * avgName
		e.Basis = "btrfs directory size " + dsBytes(size) + ", " + name
	case unix.TMPFS_MAGIC:
		// tmpfs: 20 bytes (BOGO_DIRENT_SIZE) per entry, whatever its name.
		per = 20
		e.Basis = "tmpfs directory size " + dsBytes(size) + " (20 bytes an entry)"
		if nlink > 2 {
			e.AtLeast = nlink - 2
		}
	default:
		return DirEstimate{}
	}
	e.Entries = max(uint64(float64(size)/per), e.AtLeast)
	return e
}

func dsRoundUp(n, to int) int {
	return (n + to - 1) / to * to
}

func dsBytes(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
