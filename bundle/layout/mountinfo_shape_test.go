package layout_test

import (
	"bytes"
	"slices"
	"testing"

	"github.com/nodesnap/nodesnap/bundle/layout"
)

// A table and its renumbered copy write the same shape; the IDs and the
// parents outside are each table's own; a changed line, an ID twice or a
// line without two IDs does not pass as the same shape.
func TestMountinfoShape(t *testing.T) {
	a := "22 1 259:1 / / rw - ext4 /dev/root rw\n23 22 0:5 / /dev rw - devtmpfs udev rw\n"
	b := "612 611 259:1 / / rw - ext4 /dev/root rw\n\n613 612 0:5 / /dev rw - devtmpfs udev rw"
	var wa, wb bytes.Buffer
	ida, outa, ok := layout.MountinfoShape([]byte(a), &wa)
	if !ok || !slices.Equal(ida, []int{22, 23}) || !slices.Equal(outa, []int{1}) {
		t.Fatalf("a: ids %v outside %v ok %v", ida, outa, ok)
	}
	idb, outb, ok := layout.MountinfoShape([]byte(b), &wb)
	if !ok || !slices.Equal(idb, []int{612, 613}) || !slices.Equal(outb, []int{611}) {
		t.Fatalf("b: ids %v outside %v ok %v", idb, outb, ok)
	}
	if wa.String() != wb.String() || wa.String() != "- 259:1 / / rw - ext4 /dev/root rw\n0 0:5 / /dev rw - devtmpfs udev rw\n" {
		t.Errorf("shapes %q and %q", wa.String(), wb.String())
	}
	var wc bytes.Buffer
	if _, _, ok := layout.MountinfoShape([]byte("22 1 259:1 / / ro - ext4 /dev/root rw\n23 22 0:5 / /dev rw - devtmpfs udev rw\n"), &wc); !ok || wc.String() == wa.String() {
		t.Errorf("a changed line: %q, ok %v", wc.String(), ok)
	}
	for _, raw := range []string{"5 1 0:1 / / rw - tmpfs t rw\n5 5 0:2 / /a rw - tmpfs t rw\n", "x 1 0:1 / / rw\n", "5\n"} {
		if _, _, ok := layout.MountinfoShape([]byte(raw), &bytes.Buffer{}); ok {
			t.Errorf("%q: a shape", raw)
		}
	}
}
