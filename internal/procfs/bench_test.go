package procfs

import (
	"bytes"
	"fmt"
	"testing"
)

// benchMountInfo builds a mountinfo of n lines shaped like a busy
// Kubernetes node: the fixture's host mounts, then per-pod projected-token
// tmpfs, rbd, cephfs and csi mounts with propagation fields.
func benchMountInfo(tb testing.TB, n int) []byte {
	tb.Helper()
	var b bytes.Buffer
	b.Write(readFixture(tb, "mountinfo", "kubelet-node.txt"))
	for i := 0; b.Len() == 0 || bytes.Count(b.Bytes(), []byte("\n")) < n; i++ {
		pod := fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", i*7919, i%65536, i%4096, (i*3)%4096, i*104729)
		id := 1000 + i
		switch i % 4 {
		case 0:
			fmt.Fprintf(&b, "%d 32 0:%d / /var/lib/kubelet/pods/%s/volumes/kubernetes.io~projected/kube-api-access-%05d rw,relatime shared:%d - tmpfs tmpfs rw,size=174080k,inode64\n", id, 100+i%900, pod, i, 200+i)
		case 1:
			fmt.Fprintf(&b, "%d 32 252:%d / /var/lib/kubelet/pods/%s/volumes/kubernetes.io~csi/pvc-%08x/mount rw,relatime shared:%d master:%d - ext4 /dev/rbd%d rw,stripe=1024\n", id, i%256, pod, i, 200+i, 3, i%256)
		case 2:
			fmt.Fprintf(&b, "%d 32 0:%d /volumes/csi/csi-vol-%08x/%04x /var/lib/kubelet/pods/%s/volumes/kubernetes.io~csi/pvc-%08x/mount rw,relatime shared:%d - ceph 10.0.0.11:6789,10.0.0.12:6789:/volumes/csi/csi-vol-%08x rw,name=csi-cephfs-node,secret=<hidden>,acl,mds_namespace=cephfs\n", id, 50+i%100, i, i%65536, pod, i, 200+i, i)
		case 3:
			fmt.Fprintf(&b, "%d 22 0:%d / /run/containerd/io.containerd.runtime.v2.task/k8s.io/%064x/rootfs rw,relatime - overlay overlay rw,lowerdir=/var/lib/containerd/snapshots/%d/fs,upperdir=/var/lib/containerd/snapshots/%d/fs,workdir=/var/lib/containerd/snapshots/%d/work\n", id, 300+i%700, i, i, i+1, i+1)
		}
	}
	return b.Bytes()
}

func BenchmarkParseMountInfo(b *testing.B) {
	data := benchMountInfo(b, 5000)
	if m, bad := ParseMountInfo(data); len(m) < 5000 || len(bad) != 0 {
		b.Fatalf("fixture: %d mounts, %d bad", len(m), len(bad))
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		ParseMountInfo(data)
	}
}

func BenchmarkParseStat(b *testing.B) {
	data := readFixture(b, "stat", "tmux-server.txt")
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseStat(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseStatus(b *testing.B) {
	data := readFixture(b, "status", "cat.txt")
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseStatus(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseMaps(b *testing.B) {
	data := readFixture(b, "maps", "python.txt")
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		ParseMaps(data)
	}
}
