package analyze

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

func readRecords(t testing.TB, in string) (recs []string, firsts []int) {
	t.Helper()
	rr := newRecordReader(strings.NewReader(in))
	for {
		b, n, _, err := rr.next()
		if errors.Is(err, io.EOF) {
			return recs, firsts
		}
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, string(b))
		firsts = append(firsts, n)
	}
}

func TestRecordReader(t *testing.T) {
	for _, tc := range []struct {
		name   string
		in     string
		want   []string
		firsts []int
	}{
		{
			name: "one record per headed line",
			in:   "Nov 21 09:10:01 node1 kubelet[812]: I1121 a\nNov 21 09:10:02 node1 kubelet[812]: I1121 b\n",
			want: []string{"Nov 21 09:10:01 node1 kubelet[812]: I1121 a", "Nov 21 09:10:02 node1 kubelet[812]: I1121 b"},
		},
		{
			// The rbd output's newline falls between two words of a long
			// line: joined without a space, as a wrap of a pasted line
			// would be (the signatures match either way).
			name: "klog message with the rbd output's newlines",
			in: "E0330 08:29:53.448344   29552 nodeserver.go:526] ID: 163 error unmapping volume (rbd: sysfs write failed\n" +
				"rbd: unmap failed: (16) Device or resource busy\n))\nI0330 08:29:54.527037   29552 utils.go:119] ID: 164\n",
			want: []string{"E0330 08:29:53.448344   29552 nodeserver.go:526] ID: 163 error unmapping volume (rbd: sysfs write failedrbd: unmap failed: (16) Device or resource busy ))",
				"I0330 08:29:54.527037   29552 utils.go:119] ID: 164"},
			firsts: []int{1, 4},
		},
		{
			name: "a long line wrapped inside a word joins without a space",
			in: "E0416 19:44:35.803861    2391 kubelet_volumes.go:154] Orphaned pod \"017aa18b-44cb-11e9-84a1-eeeeeeeeeeee\" found, but volume paths are still present on disk : There were a total of 155 errors similar to th\n" +
				"is. Turn up verbosity to see them.\n",
			want: []string{"E0416 19:44:35.803861    2391 kubelet_volumes.go:154] Orphaned pod \"017aa18b-44cb-11e9-84a1-eeeeeeeeeeee\" found, but volume paths are still present on disk : There were a total of 155 errors similar to this. Turn up verbosity to see them."},
		},
		{
			name: "a klog line pasted without its stamp, wrapped after a comma",
			in: "kubelet_volumes.go:154] Orphaned pod \"2b363d17-e69d-11ea-bda2-44a842186bcd\" found,\n" +
				"but volume subpaths are still present on disk\nutils.go:1] next\n",
			want: []string{"kubelet_volumes.go:154] Orphaned pod \"2b363d17-e69d-11ea-bda2-44a842186bcd\" found, but volume subpaths are still present on disk",
				"utils.go:1] next"},
		},
		{
			name: "journalctl's indented continuation",
			in:   "2026-11-21T09:10:01+0000 node1 kubelet[812]: Unmounting arguments: /x\n    Output: umount: /x: target is busy.\n",
			want: []string{"2026-11-21T09:10:01+0000 node1 kubelet[812]: Unmounting arguments: /x Output: umount: /x: target is busy."},
		},
		{
			name: "lines without any header stay apart",
			in:   "PLEG is not healthy\nsomething else\n",
			want: []string{"PLEG is not healthy", "something else"},
		},
		{
			name: "a goroutine dump after a header never joins it",
			in:   "E1121 09:10:01.000000     812 x.go:1] panic\ngoroutine 1 [running]:\nmain.main()\n\t/src/main.go:1 +0x1\n",
			want: []string{"E1121 09:10:01.000000     812 x.go:1] panic", "goroutine 1 [running]:", "main.main()", "\t/src/main.go:1 +0x1"},
		},
		{
			name: "CRI partial lines join their full line",
			in:   "2026-11-21T09:10:01.000000000Z stderr P first half \n2026-11-21T09:10:01.000000001Z stderr F second half\n2026-11-21T09:10:02.000000000Z stderr F next\n",
			want: []string{"2026-11-21T09:10:01.000000000Z stderr P first half second half", "2026-11-21T09:10:02.000000000Z stderr F next"},
		},
		{
			name: "grep's file-name prefix is a header",
			in:   "messages:Jun 17 20:18:09 ip kernel: INFO: task x:1 blocked\nmessages:Jun 17 20:18:09 ip kernel: Call Trace:\n",
			want: []string{"messages:Jun 17 20:18:09 ip kernel: INFO: task x:1 blocked", "messages:Jun 17 20:18:09 ip kernel: Call Trace:"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, firsts := readRecords(t, tc.in)
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("records:\n%q\nwant:\n%q", got, tc.want)
			}
			if tc.firsts != nil && len(firsts) == len(tc.firsts) {
				for i := range firsts {
					if firsts[i] != tc.firsts[i] {
						t.Errorf("record %d starts at line %d, want %d", i, firsts[i], tc.firsts[i])
					}
				}
			}
		})
	}
}

func TestRecordReaderBounded(t *testing.T) {
	// A headed line followed by many header-less ones: records stay
	// bounded, no line is lost.
	var b strings.Builder
	b.WriteString("E1121 09:10:01.000000     812 x.go:1] start\n")
	for range 100 {
		b.WriteString("continued\n")
	}
	recs, _ := readRecords(t, b.String())
	total := 0
	for _, r := range recs {
		total += strings.Count(r, "continued")
	}
	if total != 100 || len(recs) < 100/maxJoinedLines {
		t.Errorf("%d records holding %d continuation lines", len(recs), total)
	}
}

func TestLogRecordText(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"plain text unchanged", "I1121 09:10:01.000000 812 x.go:1] hello", "I1121 09:10:01.000000 812 x.go:1] hello"},
		{
			"klog JSON (--logging-format=json)",
			`{"ts":1606897350.25,"caller":"kubelet/kubelet_volumes.go:225","msg":"There were many similar errors.","v":0,"err":"orphaned pod \"39cfa982-dd90-403c-993e-e0223db5c110\" found","numErrs":6}`,
			`2020-12-02T08:22:30.25Z "There were many similar errors." err="orphaned pod \"39cfa982-dd90-403c-993e-e0223db5c110\" found" numErrs=6`,
		},
		{
			"object references as namespace/name",
			`{"ts":1606897350,"msg":"Pod is terminated","pod":{"name":"web-0","namespace":"default"},"podUID":"3c6f1b2a-0f4e-4d7e-9a51-6d2f7a8b9c01"}`,
			`2020-12-02T08:22:30Z "Pod is terminated" pod="default/web-0" podUID="3c6f1b2a-0f4e-4d7e-9a51-6d2f7a8b9c01"`,
		},
		{
			"docker json-file wrapping a klog line",
			`{"log":"E0416 19:44:35.803861    2391 kubelet_volumes.go:154] Orphaned pod\n","stream":"stderr","time":"2019-04-16T19:44:35.803861Z"}`,
			`2019-04-16T19:44:35.803861Z E0416 19:44:35.803861    2391 kubelet_volumes.go:154] Orphaned pod`,
		},
		{
			"CRI line around a JSON record",
			`2023-02-10T12:04:37.518011215Z stderr F {"level":"info","ts":1606897350.5,"msg":"NodeUnpublishVolume called","volume_id":"d87cc6a0"}`,
			`2020-12-02T08:22:30.5Z "NodeUnpublishVolume called" volume_id="d87cc6a0"`,
		},
		{"JSON without a message unchanged", `{"a":1}`, `{"a":1}`},
		{"broken JSON unchanged", `{"msg":"x"`, `{"msg":"x"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(logRecordText([]byte(tc.in))); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestLoggedDumps(t *testing.T) {
	x := newLogIndex()
	log := "01:38:02 kubelet[188613]: goroutine 328 [syscall, 46 minutes]:\n" +
		"01:38:02 kubelet[188613]: os.Stat(0xc002b20d20, 0x60)\n" +
		"01:38:02 kubelet[188613]: /usr/local/go/src/os/stat.go:13 +0x4d\n" +
		"01:38:02 kubelet[188613]: k8s.io/kubernetes/pkg/kubelet.(*Kubelet).cleanupOrphanedPodDirs(0xc0)\n" +
		"01:38:03 kubelet[188613]: I0101 01:38:03.000000 188613 x.go:1] something else\n" +
		`Jul 08 11:45:46 h docker[24486]: time="x" level=info msg="=== BEGIN goroutine stack dump ===\ngoroutine 7 [syscall, 90 minutes]:\nos.RemoveAll(0x1)\n\t/p/os/path.go:1 +0x1\ngithub.com/docker/docker/volume/local.(*Root).Remove(0x2)\n\t/p/local.go:1 +0x1\n"` + "\n"
	if err := x.scanLog("journal/kubelet.log", strings.NewReader(log)); err != nil {
		t.Fatal(err)
	}
	if len(x.dumps) != 2 {
		t.Fatalf("%d dumps, want 2", len(x.dumps))
	}
	st := newState()
	st.logs = x
	st.adoptLoggedDumps()
	if len(st.kubeDumps) != 1 || len(st.runtimeDump) != 1 {
		t.Fatalf("%d kubelet dumps, %d runtime dumps", len(st.kubeDumps), len(st.runtimeDump))
	}
	g := st.kubeDumps[0].Kept
	if len(g) != 1 || g[0].Minutes != 46 || !g[0].has("cleanupOrphanedPodDirs") {
		t.Errorf("kubelet dump kept %+v", g)
	}
	if r := st.runtimeDump[0].Kept; len(r) != 1 || r[0].Minutes != 90 {
		t.Errorf("runtime dump kept %+v", r)
	}
}

func FuzzRecordReader(f *testing.F) {
	f.Add([]byte("E0330 08:29:53.448344 1 x.go:1] a\nb\n  c\n2026-11-21T09:10:01.0Z stderr P x\n2026-11-21T09:10:01.0Z stderr F y\n{\"msg\":\"m\",\"ts\":1}\n"))
	f.Add([]byte(`{"log":"{\"msg\":\"x\",\"pod\":{\"name\":\"a\"}}\n","time":"2020-01-01T00:00:00Z"}`))
	f.Add([]byte("goroutine 1 [running]:\nmain.main()\n\t/x.go:1\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		rr := newRecordReader(bytes.NewReader(in))
		lines := 0
		for {
			b, n, _, err := rr.next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if n <= lines {
				t.Fatalf("record starts at line %d after line %d", n, lines)
			}
			lines = n
			if len(b) > maxRecordBytes+(256<<10) {
				t.Fatalf("record of %d bytes", len(b))
			}
			_ = logRecordText(b)
		}
		x := newLogIndex()
		if err := x.scanLog("journal/x.log", bytes.NewReader(in)); err != nil {
			t.Fatal(err)
		}
	})
}
