package events

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/internal/corpuslines"
)

// The words the parser looks for before running an expression are words
// no match of the expression is without: these checks hold that each
// shortcut changes no event, on the parse tests' records, the corpus's
// lines and any bytes.
func checkShortcuts(t *testing.T, text string) {
	t.Helper()
	lower := strings.ToLower(text)
	if reFailure.MatchString(lower) && !containsAny(lower, failureLiterals...) {
		t.Errorf("reFailure matches %q, failureLiterals miss it", lower)
	}
	if (reVerb.MatchString(lower) || reCamelVerb.MatchString(text)) && !containsAny(lower, verbLiterals...) {
		t.Errorf("a verb expression matches %q, verbLiterals miss it", text)
	}
	if reVolID.MatchString(text) && !containsAny(text, volIDWords...) {
		t.Errorf("reVolID matches %q, volIDWords miss it", text)
	}
	if reKubeletPod.MatchString(text) && !containsAny(text, kubeletPodWords...) {
		t.Errorf("reKubeletPod matches %q without its words", text)
	}
	if got, want := volUUIDSubmatch(text), reVolUUID.FindStringSubmatch(text); !reflect.DeepEqual(got, want) {
		t.Errorf("volUUIDSubmatch(%q) = %q, reVolUUID finds %q", text, got, want)
	}
	if got, want := devKeySubmatch(text), reDevKey.FindStringSubmatch(text); !reflect.DeepEqual(got, want) {
		t.Errorf("devKeySubmatch(%q) = %q, reDevKey finds %q", text, got, want)
	}
	if m, ok := podKeySubmatchIndex(text); ok {
		if want := rePodKey.FindStringSubmatchIndex(strings.ToLower(text)); !reflect.DeepEqual(m, want) {
			t.Errorf("podKeySubmatchIndex(%q) = %v, rePodKey on its lowered copy finds %v", text, m, want)
		}
	}
	if reVolumeMount.MatchString(text) && !strings.Contains(text, "volumeMount ") {
		t.Errorf("reVolumeMount matches %q without its word", text)
	}
	if got, want := kubeletPodSubmatch(text), reKubeletPod.FindStringSubmatch(text); !reflect.DeepEqual(got, want) {
		t.Errorf("kubeletPodSubmatch(%q) = %q, reKubeletPod finds %q", text, got, want)
	}
	if reNQN.MatchString(text) && !strings.Contains(text, "nqn.") {
		t.Errorf("reNQN matches %q without its word", text)
	}
	if reNamespacedPod.MatchString(text) && !containsAny(text, namespacedPodWords...) {
		t.Errorf("reNamespacedPod matches %q without its words", text)
	}
	if reZFSPool.MatchString(text) && !strings.Contains(text, "Pool '") {
		t.Errorf("reZFSPool matches %q without its word", text)
	}
	if reTalosKern.MatchString(text) && !strings.Contains(text[:min(len(text), 270)], "kern:") {
		t.Errorf("reTalosKern matches %q, talosKern's window misses its kern:", text)
	}
	if reGoStamp.MatchString(text) && (len(text) < 19 || text[4] != '/' || text[7] != '/') {
		t.Errorf("reGoStamp matches %q, goStampBody's test refuses it", text)
	}
	for _, s := range []string{text, lower} {
		if got, want := successMatch(s), reSuccess.MatchString(s); got != want {
			t.Errorf("successMatch(%q) = %v, reSuccess says %v", s, got, want)
		}
		want := ""
		for _, x := range errnos {
			if strings.Contains(s, x.phrase) {
				want = x.errno
				break
			}
		}
		if got := errnoOf(s); got != want {
			t.Errorf("errnoOf(%q) = %q, the first phrase held is %q's", s, got, want)
		}
	}
}

var shortcutEdges = []string{
	"Failed", "FAILS.", "failure:", "err=x", "Exit status 3", "CANNOT", "can't", "did not find", "does not exist", "Timed Out", "not found", "wrong fs type", "bad superblock",
	"MountDevice", "formatAndMount", "StagingTargetPath", "unstaging", "NodeUnpublishVolume", "xfs_growfs", "mkfs.ext4", "resize2fs", "Login", "Unmap", "Detach", "mAp",
	`volume_id: "x"`, `"volumeID":"x"`, `VOLUME_ID=x`, `volumeHandle=x`, `VolumeId=x`, `volumeid=x`, `volume_ID=x`,
	`volume=0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d`, `xvolume=0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d volume = \"1f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d"`, `volume "x" volume=`, `volume`,
	`MountDevice device=sdb`, `DEVICE: "nvme0n1p1"`, `dev='rbd0'`, `disk = vdb2 dev=sdc`, `_dev=sda dev:xvdf`, `dev"=sdz`, `DiSK:dm-3`, `diſk=sda`, `dis` + "\u212a" + `=sda`, `device:`, `d`,
	`mountPod=juicefs-x`, `MOUNT_POD: "a"`, `mount-pod = b`, `podName=c pod_name: d`, `xpodname=e podname='f'`, `POD-NAME:G`, `mountpod`, `pod name=h`, `podname:`, `pod_name="i:"`, `Mountpod=İx`,
	`pod "web_default(0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d)"`, `pod \"web_default\"`, `volumeMount "data"`, `volumeMount 'data'`,
	`pod \"web\" (UID: \"u\") pod="ns/web" pod "db_ns"`, `apod "x_y" pod "a_b"`, `pod "pod "c_d"`, `pod \"e_f(0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3g)\"`, `pod "`, `pod`,
	"\u00e9pod \"e_f\"", `_pod "k_l" 1pod "m_n" pod \"o_p`, `pod \"x" pod "q_r(0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d)\"`, `-pod "s_t"`,
	`nqn.2014-08.org.nvmexpress:uuid:x`, `xnqn.2014-08.a`, `NQN.2014-08.a`,
	`MountVolume.SetUp succeeded for volume`, `unsuccessful`, `successfully`, `returns successfully`, `xsuccess`, `success`, `GRPC response: {}`, `is operational again`,
	`job completed`, `completedx`, `has been mounted`, `has been unmounted`, `has been`, `succeeded.has been completed`, `asucceeded success`,
	`input/output error`, `i/o error: no such device`, `no such device or address`, `no such file or directory: device or resource busy`, `target is busy`, `too many levels of symbolic links`,
	`stale nfs file handle`, `inp`, `i`, `no such devic`,
	"for pod\tns/web-0", `for pod  ns/web-0`, `pod ns/`, `apod ns/web`, `WARNING: Pool 'tank' has been suspended`, `Pool ''`,
	strings.Repeat("a", 253) + `: kern:  err: [2024-10-29T13:44:18Z]: x`, `kern: err: [2024-10-29T13:44:18.000000000+02:00]: x`,
	`2024/01/02 03:04:05.123456 juicefs[6] <FATAL>: x`, `2024/01/02 03:04:05`, `2024/01/02 03:04:0`,
}

func TestShortcuts(t *testing.T) {
	n := 0
	for _, s := range shortcutEdges {
		n++
		checkShortcuts(t, s)
	}
	n += corpuslines.Each(t, filepath.Join("..", "..", "test", "corpus"), func(line []byte) { checkShortcuts(t, string(line)) })
	t.Logf("%d lines", n)
}

// FuzzShortcuts: the shortcuts hold on any bytes.
func FuzzShortcuts(f *testing.F) {
	for _, s := range shortcutEdges {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		checkShortcuts(t, text)
	})
}

// TestPodUnderKeyAnyCase: a pod key is read in every case rePodKey reads
// it, outside ASCII too, and an empty key lends no name.
func TestPodUnderKeyAnyCase(t *testing.T) {
	for text, want := range map[string]string{
		"pOdName=web-0":            "web-0",
		"mOUNTpOD: X":              "x",
		"PodName=a":                "a",
		"MountPod=juicefs-b":       "juicefs-b",
		"é pOd_name: c":            "c",
		"podname: nodeName:":       "",
		"no key here":              "",
		"é nothing but ascii-less": "",
	} {
		if got := podUnderKey(text); got != want {
			t.Errorf("podUnderKey(%q) = %q, want %q", text, got, want)
		}
	}
}
