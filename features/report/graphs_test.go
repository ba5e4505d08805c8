package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/read/analyze"
)

// graphFiles is incident 002 (an rbd device held in node_exporter's
// mount namespace) with the pod node_exporter runs in, incident 000's and
// 001's directory shapes in one record, and incident 003's kubelet
// goroutine dump: one page with every picture.
func graphFiles(t *testing.T) map[string][]byte {
	t.Helper()
	files := fixtureFiles(t, "incident002-rbd-held-in-namespace")
	files["processes/tasks.json"] = bytes.Replace(files["processes/tasks.json"],
		[]byte(`"comm":"node_exporter","state":"S","start_ticks":1000,`),
		[]byte(`"comm":"node_exporter","state":"S","start_ticks":1000,"pod_uid":"0f0e0d0c-1111-2222-3333-444455556666","container_id":"abcdef0123456789abcdef",`), 1)
	files["kubelet/pods.json"] = []byte(`{"kind":"PodList","items":[{"metadata":{"uid":"0f0e0d0c-1111-2222-3333-444455556666","name":"node-exporter-x7k2p","namespace":"monitoring"},
		"status":{"phase":"Running","containerStatuses":[{"name":"node-exporter","containerID":"containerd://abcdef0123456789abcdef"}]}}]}`)
	var a, b layout.DirShapeReport
	for name, into := range map[string]*layout.DirShapeReport{"incident000-deleting-leftovers": &a, "incident001-huge-volume": &b} {
		if err := json.Unmarshal(fixtureFiles(t, name)["dirshape/shape.json"], into); err != nil {
			t.Fatal(err)
		}
	}
	a.Roots = append(a.Roots, b.Roots...)
	a.DeletingCount += b.DeletingCount
	shape, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	files["dirshape/shape.json"] = shape
	files["kubelet/goroutine-debug2.txt"] = fixtureFiles(t, "incident003-cephfs-hung")["kubelet/goroutine-debug2.txt"]
	return files
}

// svgTexts returns the text of each <text> of the page's SVG whose
// aria-label starts with label, and its rects' classes.
func svgTexts(t *testing.T, doc *html.Node, label string) (texts []string, classes []string) {
	t.Helper()
	for _, s := range elements(doc, "svg") {
		if !strings.HasPrefix(attr(s, "aria-label"), label) {
			continue
		}
		for _, e := range elements(s, "text") {
			texts = append(texts, textOf(e))
		}
		for _, r := range elements(s, "rect") {
			classes = append(classes, attr(r, "class"))
		}
		return texts, classes
	}
	t.Fatalf("no chart %q on the page", label)
	return nil, nil
}

func hasAll(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	all := strings.Join(got, "\n")
	for _, w := range want {
		if !strings.Contains(all, w) {
			t.Errorf("%s lacks %q; it holds:\n%s", what, w, all)
		}
	}
}

func TestPictures(t *testing.T) {
	_, page := render(t, writeBundle(t, graphFiles(t), nil))
	doc := checkPage(t, page)

	texts, classes := svgTexts(t, doc, "Held devices")
	hasAll(t, "the holder graph", texts, "/dev/rbd3", "250:0", "rbd k8s/kubern",
		"mnt ns 4026532601", "node_exporter[21839]", "pod monitoring/node-exporter-x7k2p", "container node-exporter")
	hasAll(t, "the holder graph's boxes", classes, "node dev held", "node ns", "node proc", "node pod")

	texts, classes = svgTexts(t, doc, "Largest directories")
	hasAll(t, "the largest directories", texts, "…/3f1a9c0e7b1d4e5f8a2b6c7d9e0f1a2b/_data/cache", "≥ 5,000,000 subdirs, 7693% of the limit", "ext4: 64,998 subdirectories")
	if len(classes) == 0 || classes[0] != "st-bad" {
		t.Errorf("the largest directory, past ext4's limit, is drawn %v, want st-bad first", classes)
	}
	texts, _ = svgTexts(t, doc, ".deleting~ leftovers")
	hasAll(t, "the .deleting~ chart", texts, "volumes/transwarp.io~tosdisk", "22 · 22 empty, 0 not")

	texts, _ = svgTexts(t, doc, "The kubelet's goroutines")
	hasAll(t, "the goroutine chart", texts, "(*Kubelet).getPodVolumePathListFromDisk", "1 (33%)")
}

// A bundle without the facts says so where each picture would be.
func TestPicturesAbsent(t *testing.T) {
	_, page := render(t, writeBundle(t, fixtureFiles(t, "csi-leftovers"), nil))
	checkPage(t, page)
	for _, want := range []string{"No device is held outside the host", "The bundle holds no dirshape record.", "The bundle holds no goroutine dump of the kubelet"} {
		if !bytes.Contains(page, []byte(want)) {
			t.Errorf("page lacks %q", want)
		}
	}
}

// The holder graph stays within its rows however many devices are held,
// and counts those it leaves out.
func TestHolderGraphBounded(t *testing.T) {
	f := &analyze.Facts{HeldDevicesOmitted: 3}
	for i := range 60 {
		d := analyze.HeldDevice{Dev: fmt.Sprintf("250:%d", i), Name: fmt.Sprintf("/dev/rbd%d", i), OnlyOutsideHostNamespace: true}
		for j := range 3 {
			ns := analyze.HolderNamespace{Inode: uint64(4026532000 + j), MountPoints: []string{strings.Repeat("/very/long/path", 40)}}
			for k := range 4 {
				ns.Holders = append(ns.Holders, analyze.Holder{PID: 1000 + k, Comm: "p", Pod: "in pod ns/" + strings.Repeat("x", 300) + ", container c"})
			}
			d.Namespaces = append(d.Namespaces, ns)
		}
		f.HeldDevices = append(f.HeldDevices, d)
	}
	c, more := holderGraph(f, &budget{left: maxBundleText})
	procs := 0
	for _, r := range c.Rects {
		if r.Class == "node proc" {
			procs++
		}
	}
	if procs > maxGraphRows || procs == 0 {
		t.Errorf("%d process rows, want 1..%d", procs, maxGraphRows)
	}
	if drawn := procs / 12; more != 3+60-drawn {
		t.Errorf("%d devices drawn, %d counted as left out; want %d", drawn, more, 3+60-drawn)
	}
	for _, l := range c.Texts {
		if len([]rune(l.Text)) > 60 {
			t.Errorf("a box's line is not cut to its width: %q", l.Text)
		}
	}
}
