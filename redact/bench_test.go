package redact

import (
	"bytes"
	"fmt"
	"io"
	"math/rand"
	"strings"
	"sync"
	"testing"
)

// mixedLog generates n bytes of the text a bundle is made of: kubelet and
// containerd journal lines (volume mounts, secret volumes, orphaned pods,
// PLEG), kernel messages, mountinfo, goroutine frames, JSON, with a secret
// on about one line in five hundred.
func mixedLog(n int) []byte { return mixedLogEvery(n, 500) }

// mixedLogEvery is mixedLog with a secret on about one line in every
// (secret-dense text when every is small), of more kinds: keyed values,
// vendor tokens, JWTs, ceph keys, command-line credentials.
func mixedLogEvery(n, every int) []byte {
	rnd := rand.New(rand.NewSource(42))
	uuid := func() string {
		return fmt.Sprintf("%08x-%04x-%04x-%04x-%012x", rnd.Uint32(), rnd.Intn(1<<16), rnd.Intn(1<<16), rnd.Intn(1<<16), rnd.Int63n(1<<48))
	}
	hex := func(k int) string {
		b := make([]byte, k)
		for i := range b {
			b[i] = "0123456789abcdef"[rnd.Intn(16)]
		}
		return string(b)
	}
	ts := func() string {
		return fmt.Sprintf("Nov 21 %02d:%02d:%02d node-a", rnd.Intn(24), rnd.Intn(60), rnd.Intn(60))
	}
	klog := func() string {
		return fmt.Sprintf("I1121 %02d:%02d:%02d.%06d    1234", rnd.Intn(24), rnd.Intn(60), rnd.Intn(60), rnd.Intn(1e6))
	}
	lines := []func() string{
		func() string {
			u := uuid()
			return fmt.Sprintf(`%s kubelet[1234]: %s reconciler_common.go:258] "operationExecutor.MountVolume started for volume \"default-token-%s\" (UniqueName: \"kubernetes.io/secret/%s-default-token-%s\") pod \"app-%s\" (UID: \"%s\")"`, ts(), klog(), hex(5), u, hex(5), hex(5), u)
		},
		func() string {
			u := uuid()
			return fmt.Sprintf(`%s kubelet[1234]: %s kubelet_volumes.go:245] "orphaned pod \"%s\" found, but failed to rmdir() volume at path /var/lib/kubelet/pods/%s/volumes/kubernetes.io~csi/pvc-%s/mount: device or resource busy" numErrs=3`, ts(), klog(), u, u, uuid())
		},
		func() string {
			return fmt.Sprintf(`%s kubelet[1234]: %s kubelet.go:2287] "SyncLoop (PLEG): event for pod" pod="prod/app-%s" event={"ID":"%s","Type":"ContainerStarted","Data":"%s"}`, ts(), klog(), hex(5), uuid(), hex(64))
		},
		func() string {
			return fmt.Sprintf(`%s containerd[987]: time="2026-11-21T09:10:11.%09dZ" level=info msg="ImageCreate event name:\"sha256:%s\" labels:{key:\"io.cri-containerd.image\" value:\"managed\"}"`, ts(), rnd.Intn(1e9), hex(64))
		},
		func() string {
			return fmt.Sprintf(`[%5d.%06d] INFO: task kworker/%d:%d:%d blocked for more than 120 seconds.`, rnd.Intn(99999), rnd.Intn(1e6), rnd.Intn(16), rnd.Intn(4), rnd.Intn(99999))
		},
		func() string {
			return fmt.Sprintf(`[%5d.%06d] libceph: mon0 (1)10.0.%d.%d:6789 session lost, hunting for new mon`, rnd.Intn(99999), rnd.Intn(1e6), rnd.Intn(255), rnd.Intn(255))
		},
		func() string {
			u := uuid()
			return fmt.Sprintf(`%d %d 0:%d / /var/lib/kubelet/pods/%s/volumes/kubernetes.io~secret/default-token-%s rw,relatime shared:%d - tmpfs tmpfs rw,size=16384k,inode64`, rnd.Intn(5000), rnd.Intn(5000), rnd.Intn(300), u, hex(5), rnd.Intn(900))
		},
		func() string {
			return fmt.Sprintf(`%d 22 252:%d / /var/lib/kubelet/pods/%s/volumes/kubernetes.io~csi/pvc-%s/mount rw,relatime master:%d - ext4 /dev/rbd%d rw,stripe=16`, rnd.Intn(5000), rnd.Intn(64), uuid(), uuid(), rnd.Intn(900), rnd.Intn(16))
		},
		func() string {
			return fmt.Sprintf("k8s.io/kubernetes/pkg/kubelet.(*Kubelet).cleanupOrphanedPodDirs(0xc%09x, {0xc%09x, 0x2d, 0x40})\n\t/workspace/src/k8s.io/kubernetes/pkg/kubelet/kubelet_volumes.go:%d +0x%x", rnd.Int63n(1<<36), rnd.Int63n(1<<36), rnd.Intn(2000), rnd.Intn(4096))
		},
		func() string {
			return fmt.Sprintf(`{"attachmentID":"csi-%s","driverName":"hostpath.csi.k8s.io","nodeName":"node-a","specVolID":"pvc-%s","volumeHandle":"%s"}`, hex(64), uuid(), uuid())
		},
	}
	alnum := func(k int) string {
		b := make([]byte, k)
		for i := range b {
			b[i] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"[rnd.Intn(62)]
		}
		return string(b)
	}
	secrets := []func() string{
		func() string { return fmt.Sprintf(`-H "Authorization: Bearer %s"`, hex(32)) },
		func() string { return fmt.Sprintf(`level=error msg="db" password=%s`, hex(12)) },
		func() string { return fmt.Sprintf(`{"name":"DB_PASSWORD","value":"%s"}`, hex(12)) },
	}
	if every < 500 {
		secrets = append(secrets,
			func() string {
				return fmt.Sprintf(`%s containerd[987]: time="2026-11-21T09:10:11Z" level=error msg="pull failed: token ghp_%s lacks scope"`, ts(), alnum(36))
			},
			func() string {
				return fmt.Sprintf(`%s kubelet[1234]: %s csi.go:80] "NodeStageVolume" secret="AQ%s0FAA%s=="`, ts(), klog(), alnum(4), alnum(30))
			},
			func() string {
				return fmt.Sprintf(`2026-11-21T09:10:11.000000000Z stderr F   password: %s`, alnum(20))
			},
			func() string { return fmt.Sprintf("curl -u admin:%s https://10.0.0.%d/api", alnum(14), rnd.Intn(255)) },
			func() string {
				return fmt.Sprintf(`{"token":"eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ%s.%s"}`, alnum(40), alnum(43))
			},
			func() string {
				return fmt.Sprintf("AWS_ACCESS_KEY_ID=AKIA%s aws_secret_access_key=%s", strings.ToUpper(alnum(16)), alnum(40))
			},
		)
	}
	var b bytes.Buffer
	for b.Len() < n {
		if rnd.Intn(every) == 0 {
			b.WriteString(secrets[rnd.Intn(len(secrets))]())
		} else {
			b.WriteString(lines[rnd.Intn(len(lines))]())
		}
		b.WriteByte('\n')
	}
	return b.Bytes()
}

var benchText = sync.OnceValue(func() []byte { return mixedLog(32 << 20) })

// denseText has a secret on about one line in four.
var denseText = sync.OnceValue(func() []byte { return mixedLogEvery(32<<20, 4) })

// BenchmarkWriter: single-core redaction throughput with the built-in
// rules on mixed log text, written in 32 KiB chunks as io.Copy does.
func BenchmarkWriter(b *testing.B) {
	benchWriter(b, Default())
}

// BenchmarkWriterObfuscate: the same with IP, hostname, MAC and user
// obfuscation on.
func BenchmarkWriterObfuscate(b *testing.B) {
	r, err := Build(nil, Options{Obfuscate: []string{"ip", "hostname", "mac", "user"}, Key: testKey, Hostnames: []string{"node-a"}})
	if err != nil {
		b.Fatal(err)
	}
	benchWriter(b, r)
}

// BenchmarkWriterDense: the same on secret-dense text.
func BenchmarkWriterDense(b *testing.B) {
	benchWriterOn(b, Default(), denseText())
}

func benchWriter(b *testing.B, r *Redactor) { benchWriterOn(b, r, benchText()) }

func benchWriterOn(b *testing.B, r *Redactor, in []byte) {
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	b.ResetTimer()
	c0 := processCPU()
	defer func() { reportCPU(b, c0, int64(len(in))) }()
	for i := 0; i < b.N; i++ {
		w := r.NewWriter(io.Discard)
		for p := in; len(p) > 0; {
			n := min(32<<10, len(p))
			if _, err := w.Write(p[:n]); err != nil {
				b.Fatal(err)
			}
			p = p[n:]
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestBenchTextRedacted keeps the benchmark honest: its input does contain
// secrets, and they are found.
func TestBenchTextRedacted(t *testing.T) {
	in := mixedLog(1 << 20)
	var out bytes.Buffer
	w := Default().NewWriter(&out)
	_, _ = w.Write(in)
	_ = w.Close()
	c := w.Counts()
	if c["authorization-header"] == 0 || c["secret-assignment"] == 0 || c["env-secret"] == 0 {
		t.Errorf("benchmark text: counts %v", c)
	}
	if out.Len() > len(in) {
		t.Errorf("output %d bytes > input %d", out.Len(), len(in))
	}
}

// BenchmarkWriterLongFlagLines: long lines with an argument-like "-p" every
// few bytes (a JSON line listing hundreds of command lines). The
// command-line rules look at the whole line once per line, not once per
// "-p": before, this was quadratic in the line's length.
func BenchmarkWriterLongFlagLines(b *testing.B) {
	var buf bytes.Buffer
	for range 64 {
		for j := range 2000 {
			fmt.Fprintf(&buf, `{"cmd":"mysqldump -p --user u%d"},`, j)
		}
		buf.WriteByte('\n')
	}
	benchWriterOn(b, Default(), buf.Bytes())
}
