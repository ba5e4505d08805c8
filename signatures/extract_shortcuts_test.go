package signatures

import (
	"bytes"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/internal/corpuslines"
)

// Extract runs some expressions only on lines holding what they cannot
// match without, and two from where their first match can start: these
// checks hold that each shortcut changes no result, on the catalogue's
// examples, the corpus's lines and lines made to sit on the edges.
func checkExtractShortcuts(t *testing.T, line []byte) {
	t.Helper()
	if rePodFormat().Match(line) && !parenUID(line) {
		t.Errorf("rePodFormat matches %q, parenUID says it cannot", line)
	}
	if reUniqueName().Match(line) && !hasNameColon(line) {
		t.Errorf("reUniqueName matches %q, hasNameColon says it cannot", line)
	}
	if reServer().Match(line) && !bytes.Contains(line, []byte("erver")) && !bytes.Contains(line, []byte("libceph: ")) {
		t.Errorf("reServer matches %q without its words", line)
	}
	if reTask().Match(line) && !bytes.Contains(line, []byte(" blocked")) {
		t.Errorf("reTask matches %q without its word", line)
	}
	if got, want := podUIDSubmatch(line), rePodUID().FindSubmatch(line); !reflect.DeepEqual(got, want) {
		t.Errorf("podUIDSubmatch(%q) = %q, rePodUID finds %q", line, got, want)
	}
	if got, want := volumeSubmatch(line), reVolume().FindSubmatch(line); !reflect.DeepEqual(got, want) {
		t.Errorf("volumeSubmatch(%q) = %q, reVolume finds %q", line, got, want)
	}
	if got, want := pathSubmatch(line), rePath().FindSubmatch(line); !reflect.DeepEqual(got, want) {
		t.Errorf("pathSubmatch(%q) = %q, rePath finds %q", line, got, want)
	}
	if got, want := podNameSubmatch(line), rePodName().FindSubmatch(line); !reflect.DeepEqual(got, want) {
		t.Errorf("podNameSubmatch(%q) = %q, rePodName finds %q", line, got, want)
	}
}

// shortcutEdges are lines on the shortcuts' edges: UIDs in every case
// and place, words before them in every form, UIDs that overlap.
var shortcutEdges = []string{
	`orphaned pod "0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d" found`,
	`ORPHANED POD 0F6A0C38-4A8B-4C57-9D2A-6E0C5A1B2C3D`,
	`podUID=0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d`,
	`pod_uid: \"0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d\"`,
	`(UID: "0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d")`,
	`podName:0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d nodeName:`,
	`volume 1f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d of pod 0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d`,
	`aaaaaaaa-bbbb-cccc-dddd-eeeeffffffff-aaaa-bbbb-cccc-dddddddddddd pod=aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee`,
	`pod 0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3`,
	`(UniqueName: "kubernetes.io/projected/0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d-kube-api-access") pod "web-0" (UID: "1f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d")`,
	`-------- pod ====  "  0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d`,
	`Pod "web-0_default(0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d)" is terminated`,
	`(0f6a0c38- ( (0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d`,
	`pod="default/web-0"`, `xpod="default/web-0" pod=ns/name`, `apod: ns/n`, `pod\\\"=\"ns/a\"`, `pod`, `po`,
	`UNIQUENAME: "kubernetes.io/csi/x^y"`, `(UniqueName: \"kubernetes.io/csi/x^y\")`, `volumeName:kubernetes.io/csi/a^b`, `uniquename:`,
	`nfs: server 10.0.0.1 not responding`, `libceph: mon0 10.0.0.1:6789 session lost`, `Server=nfs.example.com`,
	`VOLUME_ID=x`, `vOlUmE pvc-1`, `REQ-ID: 0001`, `ſpec.name=x`, `Spec.Name: x`, `for volume: 268e7aa8-1`, `Volume ID vol-1`, `volum`,
	`xvolume pvc-1 volume pvc-2`, `for volume "a"`, `afor volume "a"`, `for  volume "a"`, `x ſpec.Name: a`, `ſPEC.NAME=b`, `aspec.name=c`, `volume_name=`, `volume`, `req-id`, `for vol`,
	`pod=\"ns/a\"`, `podName:x pod = ns/b`, `pod\\\ " : ns/c`, `_pod=ns/d pod=ns/e`, `pod"=ns/f`, `pod""=ns/g pod:ns/h`, `pod=`, `pod`,
	`/pods/0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d/volumes POD:0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d`, `PODNAME:"0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d"`, `podx 0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d`,
	`/var/lib/kubelet/pods/x`, `x/var/lib/y /run/z`, `//var/a/b`, `./mnt/a /mnt/b`, `/data/`, `/data/x`, `a:/opt/x/y`, `/var//x /home/u/v`,
	`/srv/"x" /var/log/pods/a`, `~/home/a /home/b`, `/var/`, `/`, `/run`, `-/run/a_/run/b /run/c.`,
	`INFO: task kworker/1:2:123 blocked for more than 120 seconds`,
	// Places a volume may start at where none does, before one that does.
	`MountVolume.SetUp succeeded for volume \"kube-api-access-x\" (UniqueName: \"a\") unmounted volumes=[data] volume pvc-9`,
	`Unmountvolume 1 xvolume 2-3 _volume 4 Volume 5`, `volumes=[a] FOR VOLUME "b"`, `volume`, `volume 1`, `\xc5volume 1`, `\xc5\xbfvolume 2`, "\xc5volume 3",
	"\xc5\xbfpec.name=d", "x\xc5\xbfpec.name=e", "\xbfpec.name=f", "spec.name\xc5\xbfpec.name=g", `REQ-ID req-id: h`, `for volumeid=i`, `forvolume "j"`,
	strings.Repeat("volume ", 40) + `volume "k"`, strings.Repeat("for volume x ", 20) + `volume_name=l`, strings.Repeat("req-id", 33),
}

func TestExtractShortcuts(t *testing.T) {
	n := 0
	check := func(line []byte) {
		n++
		checkExtractShortcuts(t, line)
	}
	for _, s := range shortcutEdges {
		check([]byte(s))
	}
	for _, c := range Classes {
		if c.Example != "" {
			check([]byte(c.Example))
		}
	}
	n += corpuslines.Each(t, filepath.Join("..", "test", "corpus"), func(line []byte) { checkExtractShortcuts(t, line) })
	t.Logf("%d lines", n)
}

// FuzzExtractShortcuts: the shortcuts hold on any bytes.
func FuzzExtractShortcuts(f *testing.F) {
	for _, s := range shortcutEdges {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		checkExtractShortcuts(t, line)
	})
}
