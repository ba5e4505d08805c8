package layout

import (
	"path"
	"strings"
	"time"
)

// dirshape's record: dirshape/shape.json, and .deleting~ leftovers grouped by their original.

// DirShapeReport is dirshape/shape.json.
type DirShapeReport struct {
	StartedAt  time.Time        `json:"started_at"`
	DurationMS float64          `json:"duration_ms"`
	Settings   DirShapeSettings `json:"settings"`
	Roots      []DirShapeRoot   `json:"roots"`
	// Totals over all roots.
	DeletingCount  uint64 `json:"deleting_count"`
	NlinkAnomalies int    `json:"nlink_anomalies"`
	// LowerBounds counts the roots whose scan stopped early.
	LowerBounds int      `json:"lower_bounds"`
	Notes       []string `json:"notes,omitempty"`
}

// DirShapeSettings are the bounds the scans ran with.
type DirShapeSettings struct {
	MaxEntries uint64  `json:"max_entries"`
	MaxSeconds float64 `json:"max_seconds"`
	// MaxDirSeconds bounds the reading of one huge directory (0: none).
	MaxDirSeconds float64 `json:"max_dir_seconds,omitempty"`
	Top           int     `json:"top"`
	MaxDepth      int     `json:"max_depth"`
	CrossMounts   bool    `json:"cross_mounts"`
	VolumeMounts  bool    `json:"volume_mounts"`
}

// Root statuses, as in DirShapeRoot.Status.
const (
	DirShapeComplete       = "complete"
	DirShapeBudget         = "budget_exhausted"
	DirShapeAbsent         = "absent"
	DirShapeNotDir         = "not_a_directory"
	DirShapeSkippedHung    = "skipped_hung"
	DirShapeHung           = "hung"
	DirShapeFailed         = "error"
	DirShapeSkippedTimeout = "skipped_deadline"
)

// DirShapeRoot is the shape of one scanned root.
type DirShapeRoot struct {
	// Path is the host path; Kind is root, volume_mount or mount.
	Path   string `json:"path"`
	Kind   string `json:"kind"`
	Status string `json:"status"`
	// Complete is true when every entry was counted. Otherwise
	// CountsAreLowerBounds is set and StopReason says why.
	Complete             bool   `json:"complete"`
	CountsAreLowerBounds bool   `json:"counts_are_lower_bounds"`
	StopReason           string `json:"stop_reason,omitempty"`
	Error                string `json:"error,omitempty"`
	// Mountpoint and FSType describe the mount holding the root (from
	// the mount table); FSMagic is its statfs type; Dev its st_dev.
	Mountpoint string `json:"mountpoint,omitempty"`
	FSType     string `json:"fstype,omitempty"`
	FSMagic    string `json:"fs_magic,omitempty"`
	Dev        string `json:"dev,omitempty"`
	// Entries counts every name below the root (the root itself not
	// included), like `find ROOT -xdev -mindepth 1 | wc -l`.
	Entries   uint64 `json:"total_entries"`
	Dirs      uint64 `json:"dirs"`
	Files     uint64 `json:"files"`
	Symlinks  uint64 `json:"symlinks"`
	Other     uint64 `json:"other"`
	EmptyDirs uint64 `json:"empty_dirs"`
	MaxDepth  int    `json:"max_depth"`
	// DepthLimited counts directories not entered because they are
	// deeper than the depth bound.
	DepthLimited uint64 `json:"depth_limited,omitempty"`
	// Largest are the directories with the most entries, largest first.
	Largest []DirShapeDir `json:"largest_dirs"`
	// NlinkAnomalies are directories with more than 64,998
	// subdirectories whose st_nlink is 1: ext4's dir_nlink overflow, the
	// signature of incident 001.
	NlinkAnomalies []DirShapeDir `json:"nlink_anomalies"`
	// Deleting groups every *.deleting~* name by its parent directory.
	Deleting              []DeletingGroup `json:"deleting"`
	DeletingCount         uint64          `json:"deleting_count"`
	DeletingGroupsOmitted uint64          `json:"deleting_groups_omitted,omitempty"`
	// MountsNotEntered counts mountpoints met below the root and left
	// alone; some are listed.
	MountsNotEntered       uint64   `json:"mounts_not_entered"`
	MountsNotEnteredSample []string `json:"mounts_not_entered_sample,omitempty"`
	// Unreadable counts directories that could not be opened or read.
	Unreadable       uint64          `json:"unreadable"`
	UnreadableSample []DirShapeError `json:"unreadable_sample,omitempty"`
	DurationMS       float64         `json:"duration_ms"`
	EntriesPerSecond float64         `json:"entries_per_second"`
	// Method is how mounts were kept out: "openat2" (the kernel refuses
	// to cross a mount) or "mount-table" (older kernels).
	Method string `json:"method,omitempty"`
}

// DirShapeDir is one directory.
type DirShapeDir struct {
	Path    string `json:"path"`
	Entries uint64 `json:"entries"`
	Subdirs uint64 `json:"subdirs"`
	// InodeSize is st_size of the directory itself: on ext4 it grows
	// with the number of entries it ever held and never shrinks.
	InodeSize int64  `json:"inode_size"`
	Nlink     uint64 `json:"nlink"`
	// Partial is set when the directory was not read to the end:
	// Entries and Subdirs are lower bounds.
	Partial      bool `json:"partial,omitempty"`
	NlinkAnomaly bool `json:"nlink_anomaly,omitempty"`
	// Count says what Entries is: DirCountExact or DirCountLowerBound.
	// Bundles from before it was written leave it empty: Partial then
	// tells (see LowerBound).
	Count string `json:"count,omitempty"`
	// EstimatedEntries is how many entries the directory's inode (its
	// size and link count, one fstat) says it holds; EstimateBasis says
	// how that was worked out. Zero when no estimate was made (small
	// directories, filesystems whose directory size says nothing).
	EstimatedEntries uint64 `json:"estimated_entries,omitempty"`
	EstimateBasis    string `json:"estimate_basis,omitempty"`
	// ReadSeconds is how long the directory was read before it was left,
	// when a per-directory time budget stopped it.
	ReadSeconds float64 `json:"read_seconds,omitempty"`
}

// What DirShapeDir.Count says of Entries.
const (
	DirCountExact      = "exact"
	DirCountLowerBound = "lower_bound"
)

// LowerBound reports whether Entries and Subdirs are lower bounds, in
// bundles of any age.
func (d DirShapeDir) LowerBound() bool {
	return d.Count == DirCountLowerBound || d.Partial
}

// Size is the best figure for how many entries the directory holds: the
// count when it is exact, else the larger of the count and the inode's
// estimate.
func (d DirShapeDir) Size() uint64 {
	if !d.LowerBound() {
		return d.Entries
	}
	return max(d.Entries, d.EstimatedEntries)
}

// DirShapeError is one directory that could not be read.
type DirShapeError struct {
	Path  string `json:"path"`
	Error string `json:"error"`
}

// DeletingGroup is every *.deleting~* name in one directory. The kubelet
// renames a volume directory to <name>.deleting~<random> before removing
// it; each failed removal leaves one behind (incident 000).
type DeletingGroup struct {
	Parent string `json:"parent"`
	Count  uint64 `json:"count"`
	// Empty and NotEmpty count the leftovers that are directories and
	// were read; Unknown the rest (not directories, mountpoints,
	// unreadable, or past the scan's budget).
	Empty    uint64 `json:"empty"`
	NotEmpty uint64 `json:"not_empty"`
	Unknown  uint64 `json:"unknown"`
	// Originals are the distinct names before ".deleting~".
	Originals        []DeletingOriginal `json:"originals"`
	OriginalsOmitted uint64             `json:"originals_omitted,omitempty"`
	// Entries lists leftovers one by one, up to a bound.
	Entries        []DeletingEntry `json:"entries"`
	EntriesOmitted uint64          `json:"entries_omitted,omitempty"`

	origIdx map[string]int
}

// OriginalIndex returns the index in Originals of the original named name.
func (g *DeletingGroup) OriginalIndex(name string) (int, bool) {
	if g.origIdx == nil {
		g.origIdx = map[string]int{}
		for i, o := range g.Originals {
			g.origIdx[o.Name] = i
		}
	}
	i, ok := g.origIdx[name]
	return i, ok
}

// DeletingOriginal is the volume directory a group of leftovers came
// from.
type DeletingOriginal struct {
	Name  string `json:"name"`
	Count uint64 `json:"count"`
	// Exists says whether the original name is still in the directory
	// (null when that could not be checked).
	Exists *bool `json:"exists"`
	// Mounted is true when the original, or something under it, is a
	// mountpoint in the host's (or nodesnap's) mount table; Mounts lists
	// some of them.
	Mounted bool     `json:"mounted"`
	Mounts  []string `json:"mounts,omitempty"`
}

// DeletingEntry is one *.deleting~* name.
type DeletingEntry struct {
	Name     string `json:"name"`
	Original string `json:"original"`
	Suffix   string `json:"suffix"`
	// Type is dir, file, symlink or other.
	Type string `json:"type"`
	// Entries is how many names the leftover directory holds (a lower
	// bound when Partial); Empty is null when it was not read.
	Entries    uint64 `json:"entries"`
	Empty      *bool  `json:"empty"`
	Partial    bool   `json:"partial,omitempty"`
	Mountpoint bool   `json:"mountpoint,omitempty"`
}

// deletingMarker is what the kubelet's RenameDirectory puts between a
// volume directory's name and a random number.
const deletingMarker = ".deleting~"

// ParseDeletingName splits a name matching *.deleting~* at the last
// ".deleting~" into the original name and the suffix (the kubelet's
// random digits). ok is false for any other name.
func ParseDeletingName(name string) (original, suffix string, ok bool) {
	i := strings.LastIndex(name, deletingMarker)
	if i < 0 {
		return "", "", false
	}
	return name[:i], name[i+len(deletingMarker):], true
}

// Bounds on what one group keeps in detail.
const (
	DeletingKeepOriginals = 256
)

// Add counts one leftover and keeps it in Entries while fewer than keep
// are kept. It returns its index in Entries, or -1. Resolve must be
// called for it once what it holds is known.
func (g *DeletingGroup) Add(e DeletingEntry, keep int) int {
	g.Count++
	if i, ok := g.OriginalIndex(e.Original); ok {
		g.Originals[i].Count++
	} else if len(g.Originals) < DeletingKeepOriginals {
		g.origIdx[e.Original] = len(g.Originals)
		g.Originals = append(g.Originals, DeletingOriginal{Name: e.Original, Count: 1})
	} else {
		g.OriginalsOmitted++
	}
	if len(g.Entries) >= keep {
		g.EntriesOmitted++
		return -1
	}
	g.Entries = append(g.Entries, e)
	return len(g.Entries) - 1
}

// Resolve records what reading leftover idx (from Add; -1 for one not
// kept in detail) found: read is false when it was not read at all,
// complete false when it was read only in part.
func (g *DeletingGroup) Resolve(idx int, entries uint64, read, complete bool) {
	var e *DeletingEntry
	if idx >= 0 && idx < len(g.Entries) {
		e = &g.Entries[idx]
		e.Entries = entries
		e.Partial = read && !complete
	}
	switch {
	case read && entries > 0:
		g.NotEmpty++
		if e != nil {
			f := false
			e.Empty = &f
		}
	case read && complete:
		g.Empty++
		if e != nil {
			t := true
			e.Empty = &t
		}
	default:
		g.Unknown++
	}
}

// MarkDeletingMounted fills each original's Mounted and Mounts from
// mounted, which lists the mountpoints at or under a path.
func MarkDeletingMounted(groups []DeletingGroup, mounted func(p string) []string) {
	for gi := range groups {
		g := &groups[gi]
		for oi := range g.Originals {
			o := &g.Originals[oi]
			ms := mounted(path.Join(g.Parent, o.Name))
			o.Mounted = len(ms) > 0
			if len(ms) > 4 {
				ms = ms[:4]
			}
			o.Mounts = ms
		}
	}
}
