package layout

import (
	"errors"
	"fmt"
)

// One copy of each distinct mount table (mounts.json format 2).
//
// Every copy of a mount namespace numbers its mounts anew, so two
// namespaces never have byte-identical tables; but at a thousand
// namespaces most tables are the same but for those numbers (every
// `unshare --mount` of the same parent, every sandbox made from the same
// template). Format 2 keeps each distinct table once in
// MountsReport.Tables, numbered as the first namespace that has it
// numbers it, and gives each namespace the table's hash, its own mount
// IDs (MountIDs, as runs) and the parents outside the table
// (RootParents). A table is the same as another when every line is the
// same after its first two fields and every mount's parent is the same
// line of the table (or outside it in both).

// Format 3 also keeps the device index from repeating those tables: a
// device's entry names, per shared table, the namespaces that mount it
// exactly as their table does (MountDevice.Tables) instead of listing
// each one's mounts and processes (see devicetables.go). A reader of
// format 2 would take such a device as held by fewer namespaces, so it
// is a new format, which such a reader refuses.

// Format 4 keeps the raw tables (mountinfo.txt) from repeating them as
// well: a namespace whose table is one written before it in the same file
// but for its mount IDs is written as its header alone, naming that copy
// and giving its own IDs (see RebuildMountinfo). mounts.json is as in
// format 3; the format says that its raw tables may be written so, which
// a reader of format 3 would read as empty tables.

// MountsFormat is the mounts.json format this code writes and the newest
// it reads (MountsReport.Format).
const MountsFormat = 4

// MountTable is one distinct mount table of format 2.
type MountTable struct {
	// Hash names the table: the first 128 bits, in hex, of an HMAC-SHA256
	// of its lines without their mount IDs (the parents given as lines of
	// the table), keyed with a key drawn for the run and not kept. It
	// names the table within its bundle only: the same table has another
	// hash in another bundle, and nothing of the table can be guessed
	// from it. Namespaces refer to it by this.
	Hash string `json:"hash"`
	// Mounts is the table, numbered as its first namespace numbers it.
	Mounts []NamespaceMount `json:"mounts"`
}

// CheckMountsFormat says whether a reader of this code reads mounts.json
// of format f (0 is format 1, written before the field existed).
func CheckMountsFormat(f int) error {
	if f < 0 || f > MountsFormat {
		return fmt.Errorf("mounts.json is of format %d, newer than this nodesnap reads (formats 1 to %d): read it with a newer nodesnap", f, MountsFormat)
	}
	return nil
}

// MountIDRuns writes ids as runs [first, count] of consecutive IDs: a copy
// of a namespace numbers its mounts in one run.
func MountIDRuns(ids []int) [][2]int {
	var runs [][2]int
	for _, id := range ids {
		if n := len(runs); n > 0 && runs[n-1][0]+runs[n-1][1] == id {
			runs[n-1][1]++
			continue
		}
		runs = append(runs, [2]int{id, 1})
	}
	return runs
}

// ErrMountTable is returned when a namespace's numbers do not fit its
// table (a damaged or hostile mounts.json).
var ErrMountTable = errors.New("a namespace's mount IDs do not fit its mount table")

// RenumberMounts gives a namespace's mount IDs and parent IDs from its
// table's (tableIDs, tableParents, mount by mount) and its own runs and
// root parents. It fails, allocating nothing more than the table's size,
// when the runs do not give exactly one ID per mount or the root parents
// do not match the mounts whose parent is outside the table.
func RenumberMounts(tableIDs, tableParents []int, runs [][2]int, rootParents []int) (ids, parents []int, err error) {
	n := len(tableIDs)
	if len(tableParents) != n {
		return nil, nil, ErrMountTable
	}
	ids = make([]int, 0, n)
	for _, r := range runs {
		if r[1] <= 0 || r[1] > n-len(ids) {
			return nil, nil, fmt.Errorf("%w: %d mounts in the table, more IDs given", ErrMountTable, n)
		}
		for k := range r[1] {
			ids = append(ids, r[0]+k)
		}
	}
	if len(ids) != n {
		return nil, nil, fmt.Errorf("%w: %d mounts in the table, %d IDs given", ErrMountTable, n, len(ids))
	}
	at := make(map[int]int, n)
	for j, id := range tableIDs {
		at[id] = j
	}
	parents = make([]int, n)
	k := 0
	for j, p := range tableParents {
		if i, ok := at[p]; ok {
			parents[j] = ids[i]
			continue
		}
		if k >= len(rootParents) {
			return nil, nil, fmt.Errorf("%w: more mounts with a parent outside the table than root parents given", ErrMountTable)
		}
		parents[j] = rootParents[k]
		k++
	}
	if k != len(rootParents) {
		return nil, nil, fmt.Errorf("%w: %d root parents given, %d mounts with a parent outside the table", ErrMountTable, len(rootParents), k)
	}
	return ids, parents, nil
}

// NamespaceTableMounts is namespace ns's mounts from its table t (format
// 2): t's mounts numbered as ns numbers them. The strings are shared with
// t's.
func NamespaceTableMounts(t *MountTable, ns *MountNamespace) ([]NamespaceMount, error) {
	tids := make([]int, len(t.Mounts))
	tpar := make([]int, len(t.Mounts))
	for j := range t.Mounts {
		tids[j], tpar[j] = t.Mounts[j].ID, t.Mounts[j].ParentID
	}
	ids, parents, err := RenumberMounts(tids, tpar, ns.MountIDs, ns.RootParents)
	if err != nil {
		return nil, err
	}
	out := make([]NamespaceMount, len(t.Mounts))
	for j := range out {
		out[j] = t.Mounts[j]
		out[j].ID, out[j].ParentID = ids[j], parents[j]
	}
	return out, nil
}

// ExpandMountTables makes a whole decoded mounts.json of any format look
// like format 1: every namespace that names a table gets its mounts from
// it, numbered as its own. A namespace whose table is missing or whose
// numbers do not fit it is left without mounts and named in the error
// (the others are still filled).
func ExpandMountTables(rep *MountsReport) error {
	if err := CheckMountsFormat(rep.Format); err != nil {
		return err
	}
	byHash := make(map[string]*MountTable, len(rep.Tables))
	for i := range rep.Tables {
		if _, ok := byHash[rep.Tables[i].Hash]; !ok {
			byHash[rep.Tables[i].Hash] = &rep.Tables[i]
		}
	}
	var errs []error
	for i := range rep.Namespaces {
		ns := &rep.Namespaces[i]
		if ns.Table == "" {
			continue
		}
		t := byHash[ns.Table]
		if t == nil {
			errs = append(errs, fmt.Errorf("mount namespace %d: its table %q is not in mounts.json", ns.Inode, ns.Table))
			continue
		}
		ms, err := NamespaceTableMounts(t, ns)
		if err != nil {
			errs = append(errs, fmt.Errorf("mount namespace %d: %w", ns.Inode, err))
			continue
		}
		ns.Mounts = ms
	}
	if err := ExpandDeviceTables(rep); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
