package mountprobe

import (
	"fmt"
	"hash/maphash"
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/internal/procfs"
)

// buildItems parses each table a part at a time: the items, their
// over-mounts, parents and namespaces must be what the whole table says,
// across part boundaries, and a bad line is reported with its line number
// in the table.
func TestMpBuildItemsByParts(t *testing.T) {
	var host strings.Builder
	host.WriteString("1 0 8:1 / / rw - ext4 /dev/sda1 rw\n")
	host.WriteString("2 1 0:40 / /a rw - tmpfs a rw\n")
	host.WriteString("3 2 0:41 / /a rw - tmpfs b rw\n") // over /a: 2 is hidden
	host.WriteString("4 3 0:42 / /a/b rw - tmpfs c rw\n")
	host.WriteString("5 1 0:43 / /sys/fs/fuse/connections rw - fusectl fusectl rw\n")
	host.WriteString("6 1 0:44 / /f rw - fuse.sshfs u@h:/ rw\n")
	// Enough mounts to span several parts; one of them is over-mounted
	// and the mount on it comes in a later part.
	const n = 3 * chunkLines
	for i := range n {
		fmt.Fprintf(&host, "%d 1 0:%d / /m/%d rw - tmpfs m%d rw\n", 100+i, 1000+i, i, i%3)
	}
	fmt.Fprintf(&host, "%d 100 0:999 / /m/0 rw - tmpfs over rw\n", 100+n)
	host.WriteString("garbage\n")
	badLine := 6 + n + 2
	// A second namespace sharing the root mount and the over-mount of /m/0.
	other := "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n" +
		"7 1 0:999 / /m/0 rw - tmpfs over rw\n" +
		"8 7 0:50 / /m/0/x rw - nfs4 srv:/x rw\n"

	nsHost := &mpNamespace{inode: 10, host: true, first: true, raw: []byte(host.String())}
	nsOther := &mpNamespace{inode: 20, rep: 42, prefix: "/proc/42/root", raw: []byte(other)}
	p := &prober{}
	items := p.buildItems([]*mpNamespace{nsHost, nsOther})

	if want := 6 + n + 1 + 1; len(items) != want {
		t.Fatalf("%d items, want %d (the shared mounts once)", len(items), want)
	}
	if nsHost.raw != nil || nsOther.raw != nil {
		t.Errorf("a raw table is still held after its items were built")
	}
	if nsHost.nMounts != 6+n+1 || nsOther.nMounts != 3 {
		t.Errorf("tables of %d and %d mounts, want %d and 3", nsHost.nMounts, nsOther.nMounts, 6+n+1)
	}
	root := items[0]
	if root.rec.Mountpoint != "/" || fmt.Sprint(root.rec.Namespaces) != "[10 20]" {
		t.Errorf("root mount %s in namespaces %v, want / in [10 20]", root.rec.Mountpoint, root.rec.Namespaces)
	}
	a, over, ab := items[1], items[2], items[3]
	if !a.hidden || over.hidden || ab.parent != over || a.parent != nil || over.parent != a {
		t.Errorf("/a: hidden %v (want true), over /a hidden %v (want false), /a/b's parent %v (want the over-mount), over's parent %v (want /a)",
			a.hidden, over.hidden, ab.parent, over.parent)
	}
	m0, m0over := items[6], items[6+n]
	if m0.rec.Mountpoint != "/m/0" || !m0.hidden || m0over.rec.Mountpoint != "/m/0" || m0over.hidden || m0over.parent != m0 {
		t.Errorf("/m/0 (%s hidden %v) and the mount on it in a later part (%s hidden %v parent %p, want %p)",
			m0.rec.Mountpoint, m0.hidden, m0over.rec.Mountpoint, m0over.hidden, m0over.parent, m0)
	}
	if last := items[5+n]; last.rec.Mountpoint != fmt.Sprintf("/m/%d", n-1) || last.parent != root || last.rec.Source != "m"+fmt.Sprint((n-1)%3) {
		t.Errorf("last mount of the last part: %s source %s parent %p, want /m/%d, source m%d, parent the root", last.rec.Mountpoint, last.rec.Source, last.parent, n-1, (n-1)%3)
	}
	if fmt.Sprint(m0over.rec.Namespaces) != "[10 20]" {
		t.Errorf("the over-mount of /m/0 in namespaces %v, want [10 20]", m0over.rec.Namespaces)
	}
	nfs := items[len(items)-1]
	if nfs.rec.ProbePath != "/proc/42/root/m/0/x" || nfs.rec.ProbeNamespace != 20 || nfs.parent != m0over || nfs.rec.Class != "network" {
		t.Errorf("the other namespace's own mount: %+v, parent %p (want %p)", nfs.rec, nfs.parent, m0over)
	}
	var kept []string
	for _, ns := range []*mpNamespace{nsHost, nsOther} {
		for _, m := range ns.mounts {
			kept = append(kept, m.FSType)
		}
	}
	if got := strings.Join(kept, " "); got != "fusectl fuse.sshfs nfs4" {
		t.Errorf("mounts kept for finding fusectl: %s, want fusectl fuse.sshfs nfs4", got)
	}
	if len(p.notes) != 1 || !strings.Contains(p.notes[0], fmt.Sprintf("1 mountinfo line(s) could not be parsed (first: line %d:", badLine)) {
		t.Errorf("notes %q, want one naming line %d", p.notes, badLine)
	}
	if c := procfs.Classify(procfs.Mount{FSType: "fuse.sshfs"}); items[5].class != c {
		t.Errorf("the FUSE mount's class %v, want %v", items[5].class, c)
	}
}

// Two keys whose hashes collide are both found: the second in the
// collision map.
func TestMpDistinctCollision(t *testing.T) {
	d := newMpDistinct()
	mk := func(mp string) *mpItem {
		it := &mpItem{major: 0, minor: 40}
		it.rec.Root, it.rec.Mountpoint = "/", mp
		return it
	}
	a, b := mk("/a"), mk("/b")
	// Plant a under b's hash, as a collision would.
	d.byHash[maphash.Comparable(d.seed, b.key())] = a
	d.add(b)
	if got := d.get(b.key()); got != b {
		t.Errorf("b's key found %p, want b %p", got, b)
	}
	if got := d.get(a.key()); got != nil {
		t.Errorf("a's key (never added under its own hash) found %p", got)
	}
	if got := d.get(mk("/c").key()); got != nil {
		t.Errorf("an unseen key found %p", got)
	}
}

// A mount ID listed twice (a table read while mounts change): the last
// line's mount is the parent, as the kernel's table would show it now.
func TestMpBuildItemsDuplicateID(t *testing.T) {
	table := "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n" +
		"2 1 0:40 / /old rw - tmpfs t rw\n" +
		"2 1 0:41 / /new rw - tmpfs t rw\n" +
		"3 2 0:42 / /new/x rw - tmpfs t rw\n"
	ns := &mpNamespace{inode: 1, host: true, first: true, raw: []byte(table)}
	items := (&prober{}).buildItems([]*mpNamespace{ns})
	if len(items) != 4 {
		t.Fatalf("%d items, want 4", len(items))
	}
	if x := items[3]; x.parent != items[2] {
		t.Errorf("/new/x's parent is %v, want /new", x.parent)
	}
}

// The memory limit follows the tables' size between its floor and the
// collection's ceiling.
func TestMpMemoryLimit(t *testing.T) {
	for _, c := range []struct {
		lines int
		want  int64
	}{
		{0, 32 << 20},
		{20_000, 32 << 20},             // 8 MiB + 19.5 MiB: the floor
		{30_000, 8<<20 + 30_000<<10},   // 37.3 MiB
		{100_000, 8<<20 + 100_000<<10}, // 105.7 MiB
		{1_000_000, 256 << 20},
	} {
		if got := memoryLimit(c.lines); got != c.want {
			t.Errorf("memoryLimit(%d) = %d, want %d", c.lines, got, c.want)
		}
	}
}

// While the tables are turned into items, the memory limit follows the
// items built, the lines of the table being read and the bytes of the
// tables still to read, and ends at the items' own: namespaces that repeat
// the host's mounts add their bytes, not a kilobyte a line.
func TestMpBuildItemsMemoryLimit(t *testing.T) {
	const n, dups, dupLines = 30_000, 50, 100
	var host, dup strings.Builder
	for i := range n {
		line := fmt.Sprintf("%d 1 0:%d / /m/%d rw - tmpfs m rw\n", 100+i, 1000+i, i)
		host.WriteString(line)
		if i < dupLines {
			dup.WriteString(line)
		}
	}
	order := []*mpNamespace{{inode: 1, host: true, first: true, raw: []byte(host.String())}}
	for i := range dups {
		order = append(order, &mpNamespace{inode: uint64(10 + i), rep: 10 + i, prefix: fmt.Sprintf("/proc/%d/root", 10+i), raw: []byte(dup.String())})
	}
	var limits []int64
	p := &prober{limitMemory: func(l int64) { limits = append(limits, l) }}
	items := p.buildItems(order)
	if len(items) != n {
		t.Fatalf("%d items, want %d", len(items), n)
	}
	if len(limits) < 2 {
		t.Fatalf("limits set: %v, want one for the lines to read and one lower for the items", limits)
	}
	if first, want := limits[0], memoryLimit(n)+int64(dups*dup.Len()); first != want {
		t.Errorf("first limit %d, want %d (the host's lines and the other tables' bytes)", first, want)
	}
	if last, want := limits[len(limits)-1], memoryLimit(n); last != want {
		t.Errorf("last limit %d, want %d (the items)", last, want)
	}
	// Never a kilobyte for each line of every table: at most the items,
	// one table's lines and the other tables' bytes.
	bound := memoryLimit(n+dupLines) + int64(dups*dup.Len())
	for _, l := range limits {
		if l > bound {
			t.Errorf("limit %d, above %d", l, bound)
		}
	}
}
