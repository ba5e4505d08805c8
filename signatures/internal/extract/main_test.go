package main

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// A file written the way upstream logs: printf and structured klog calls,
// errors wrapped with fmt.Errorf, the kubelet's GenerateError prefixes, a
// format named by a constant, a concatenation.
const sample = `package x

const opExists = "an operation with the given Volume ID %s already exists"

func f() {
	klog.Errorf("Failed to remove orphaned pod %q dir; err: %v", uid, err)
	klog.V(3).InfoS("Pod is terminated, but some volumes have not been cleaned up", "pod", klog.KObj(pod), "podUID", pod.UID)
	klog.ErrorS(err, "Failed cleaning up orphaned pod directories")
	_ = fmt.Errorf("orphaned pod %q found, but " + "volume paths are still present on disk", uid)
	_ = volumeToUnmount.GenerateError("UnmountVolume.TearDown failed", err)
	_ = status.Errorf(codes.Aborted, opExists, volID)
	log.G(ctx).WithError(err).Warnf("short")
	_ = errors.New("x")
}
`

func TestExtractFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.go")
	if err := os.WriteFile(p, []byte(sample), 0o644); err != nil {
		t.Fatal(err)
	}
	got := extractFile("kubelet", p)
	want := []row{
		{"kubelet", "orphaned-pod-remove-failed", "log", "Failed to remove orphaned pod %q dir; err: %v", nil},
		{"kubelet", "pod-volumes-not-cleaned-up", "log", "Pod is terminated, but some volumes have not been cleaned up", []string{"pod", "podUID"}},
		{"kubelet", "orphaned-pods-cleanup-failed", "log", "Failed cleaning up orphaned pod directories", nil},
		{"kubelet", "orphaned-pod-volume-paths", "error", "orphaned pod %q found, but volume paths are still present on disk", nil},
		{"kubelet", "teardown-failed", "volume-op", "UnmountVolume.TearDown failed", nil},
		{"kubelet", "csi-operation-exists", "error", "an operation with the given Volume ID %s already exists", nil},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("extracted:\n%#v\nwant:\n%#v", got, want)
	}
}

func TestVersionRanges(t *testing.T) {
	all := []string{"1.10", "1.11", "1.12", "1.13", "1.14"}
	for _, tc := range []struct {
		in   []string
		want string
	}{
		{[]string{"1.10", "1.11", "1.12"}, "1.10-1.12"},
		{[]string{"1.10", "1.12", "1.13", "1.14"}, "1.10,1.12-1.14"},
		{[]string{"1.14"}, "1.14"},
		{nil, ""},
	} {
		in := map[string]bool{}
		for _, v := range tc.in {
			in[v] = true
		}
		if got := versionRanges(all, in); got != tc.want {
			t.Errorf("versionRanges(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
