package main

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/test/testkit"
)

// plantedSecret is one secret put where a collector really reads it.
type plantedSecret struct {
	what, value string
}

// Secrets planted in a node's files, a process's command line, a mount's
// source and the logs are gone from every byte of the bundle, from the
// manifest and from nodesnap's own output, in plain text and in base64;
// the manifest counts them.
func TestCollectRedactsPlantedSecrets(t *testing.T) {
	testkit.RequireRoot(t)
	root := t.TempDir()
	secrets := []plantedSecret{
		{"kubeconfig token", "kc-token-9f8e7d6c5b4a39281706f5e4d3c2b1a0"},
		{"kubeconfig client key", base64.StdEncoding.EncodeToString([]byte("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAplantedkeymaterial\n-----END RSA PRIVATE KEY-----\n"))},
		{"kubelet.conf password", "Kub3letPassw0rdPlanted"},
		{"ceph keyring", "AQBplantedCephKeyZ9YXdmZWxsIHRoaXMgaXM=="},
		{"csi state PEM", "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQCplantedPEMbody"},
		{"csi state secret", "csi-secret-7e6d5c4b3a2918"},
		{"fstab url password", "SmbUrlPassw0rd"},
		{"fstab option password", "SmbOptPassw0rd"},
		{"iscsi chap", "ChapSecretPlanted42"},
		{"env file password", "EnvFilePassw0rdPlanted"},
		{"containerd registry password", "RegistryPassw0rdPlanted"},
		{"aws access key id", "AKIAPLANTEDEXAMPLE7Q"},
		{"aws secret", "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"},
		{"azure account key", "PlantedAzureAccountKey0123456789abcdefABCDEF+/=="},
		{"gcp private key id", "0123456789abcdef0123456789abcdefplanted1"},
		{"log bearer token", "eyJhbGciOiJSUzI1NiIsImtpZCI6InBsYW50ZWQifQ.eyJzdWIiOiJzeXN0ZW06bm9kZTpwbGFudGVkIn0.c2lnbmF0dXJlcGxhbnRlZA"},
		{"log basic auth", "cGxhbnRlZHVzZXI6cGxhbnRlZHBhc3M="},
		{"kernel log url password", "NfsUrlPassw0rd"},
		{"cmdline password flag", "CmdlinePassw0rdPlanted"},
		{"cmdline token flag", "cmdline-token-0a1b2c3d4e5f"},
		{"cmdline url password", "DbUrlPassw0rdPlanted"},
		{"mount source password", "MountSrcPassw0rd"},
	}
	s := func(what string) string {
		for _, p := range secrets {
			if p.what == what {
				return p.value
			}
		}
		t.Fatalf("no planted secret %q", what)
		return ""
	}
	write := func(rel, content string) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("var/lib/kubelet/kubeconfig", fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- cluster:
    server: https://10.0.0.1:6443
  name: default
users:
- name: default-auth
  user:
    token: %s
    client-key-data: %s
`, s("kubeconfig token"), s("kubeconfig client key")))
	write("etc/kubernetes/kubelet.conf", fmt.Sprintf("users:\n- name: kubelet\n  user:\n    username: kubelet\n    password: %s\n", s("kubelet.conf password")))
	write("etc/ceph/ceph.client.admin.keyring", fmt.Sprintf("[client.admin]\n\tkey = %s\n\tcaps mon = \"allow *\"\n", s("ceph keyring")))
	write("var/lib/csi-hostpath-data/state.json", fmt.Sprintf(`{"Volumes":[{"VolName":"pvc-1","VolID":"v1","VolSize":1,"VolPath":"/csi-data-dir/v1","VolAccessType":0,"ParentVolID":"","ParentSnapID":"","Ephemeral":false,"NodeID":"n1","Kind":"","ReadOnlyAttach":false,"Attached":true,"Staged":["/var/lib/kubelet/plugins/kubernetes.io/csi/pv/pvc-1/globalmount"],"Published":null,"tls_key":"-----BEGIN PRIVATE KEY-----\n%s\n-----END PRIVATE KEY-----\n","secret":"%s"}],"Snapshots":[]}`, s("csi state PEM"), s("csi state secret")))
	write("etc/fstab", fmt.Sprintf("UUID=1234 / ext4 defaults 0 1\n//svc:%s@files.example.com/share /mnt/share cifs username=svc,password=%s 0 0\n", s("fstab url password"), s("fstab option password")))
	write("etc/iscsi/iscsid.conf", fmt.Sprintf("node.startup = automatic\nnode.session.auth.authmethod = CHAP\nnode.session.auth.username = iqn-user\nnode.session.auth.password = %s\n", s("iscsi chap")))
	write("etc/default/kubelet", fmt.Sprintf("KUBELET_EXTRA_ARGS=--node-ip=10.0.0.5\nDB_PASSWORD=%s\n", s("env file password")))
	write("etc/containerd/config.toml", fmt.Sprintf("version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".registry.configs.\"registry.example.com\".auth]\n  username = \"robot\"\n  password = \"%s\"\n", s("containerd registry password")))
	write("etc/gcp/sa.json", fmt.Sprintf(`{"type": "service_account", "project_id": "p", "private_key_id": "%s", "client_email": "sa@p.iam.gserviceaccount.com"}`+"\n", s("gcp private key id")))
	write("etc/aws/credentials", fmt.Sprintf("[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n", s("aws access key id"), s("aws secret")))
	write("etc/azure/storage.conf", fmt.Sprintf("DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=%s;EndpointSuffix=core.windows.net\n", s("azure account key")))
	write("var/log/messages", fmt.Sprintf(`2026-11-21T08:00:00+00:00 node1 kubelet[4242]: I1121 request to https://10.0.0.1:6443 with header Authorization: Bearer %s
2026-11-21T08:00:01+00:00 node1 kubelet[4242]: E1121 rbd: map failed: exit status 1, rbd output: [114 98 100 58 32 115 121 115 102 115]
2026-11-21T08:00:02+00:00 node1 registry-proxy[77]: upstream sent Authorization: Basic %s
`, s("log bearer token"), s("log basic auth")))
	write("var/log/kern.log", fmt.Sprintf("2026-11-21T08:00:03+00:00 node1 kernel: nfs: server nfs://backup:%s@10.0.0.9 not responding, still trying\n", s("kernel log url password")))

	// A process whose command line carries secrets, as a misconfigured
	// sidecar's would.
	holder := exec.Command("/bin/sh", "-c", "sleep 300; :", "planted-holder",
		"--password="+s("cmdline password flag"), "--token", s("cmdline token flag"),
		"--db=postgres://admin:"+s("cmdline url password")+"@db.example.com:5432/app")
	holder.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-holder.Process.Pid, syscall.SIGKILL)
		holder.Wait()
	})
	// A mount whose source names a credential, as a CIFS mount's can.
	mp := filepath.Join(t.TempDir(), "share")
	if err := os.MkdirAll(mp, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("//svc:"+s("mount source password")+"@files.example.com/share", mp, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(mp, unix.MNT_DETACH) })

	out := t.TempDir()
	env := []string{"PATH=/nonexistent"} // no journalctl: the journal collector reads the fixture's /var/log
	r := runNodesnap(t, 120*time.Second, env,
		"collect", "--output-dir", out, "--root", root, "--proc", "/proc", "--timeout", "90s",
		"--only", "host,processes,mounts,nodeconfig,csi,journal",
		"--config-file", "/etc/gcp/sa.json", "--config-file", "/etc/aws/credentials", "--config-file", "/etc/azure/storage.conf")
	if r.code != exitOK && r.code != exitPartial {
		t.Fatalf("collect exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	p := bundlePath(t, out)
	c := mustValidate(t, p)
	everything := map[string][]byte{"(stdout)": []byte(r.stdout), "(stderr)": []byte(r.stderr)}
	for name, b := range c.Files {
		everything[name] = b
	}
	_, mraw, err := readManifestRaw(p)
	if err != nil {
		t.Fatal(err)
	}
	everything["manifest.json"] = mraw
	for _, sec := range secrets {
		forms := []string{sec.value, base64.StdEncoding.EncodeToString([]byte(sec.value)), base64.RawStdEncoding.EncodeToString([]byte(sec.value))}
		for name, b := range everything {
			for _, f := range forms {
				if bytes.Contains(b, []byte(f)) {
					t.Errorf("planted %s found in %s", sec.what, name)
				}
			}
		}
	}
	// The evidence is still there: the secrets' surroundings survive.
	for _, want := range []struct{ file, text string }{
		{"nodeconfig/files/etc/fstab", "/mnt/share cifs"},
		{"nodeconfig/files/var/lib/kubelet/kubeconfig", "server: https://10.0.0.1:6443"},
		{"processes/ps.txt", "planted-holder"},
	} {
		if !bytes.Contains(c.Files[want.file], []byte(want.text)) {
			t.Errorf("%s lost %q:\n%s", want.file, want.text, c.Files[want.file])
		}
	}
	if !containsAny(c.Files, "journal/", "rbd output: [114 98 100 58") {
		t.Errorf("the rbd byte array did not survive in the journal files")
	}
	// Every file that held a planted secret has a redaction counted.
	m := c.Manifest
	counted := map[string]int{}
	for _, f := range m.Files {
		for _, n := range f.Redactions {
			counted[f.Path] += n
		}
	}
	for _, f := range []string{"nodeconfig/files/var/lib/kubelet/kubeconfig", "nodeconfig/files/etc/fstab", "nodeconfig/files/etc/ceph/ceph.client.admin.keyring", "nodeconfig/files/etc/iscsi/iscsid.conf", "nodeconfig/files/etc/containerd/config.toml", "processes/ps.txt"} {
		if counted[f] == 0 {
			t.Errorf("%s: no redaction counted in the manifest", f)
		}
	}
	if m.Redaction.Total < len(secrets) {
		t.Errorf("manifest counts %d redactions for %d planted secrets", m.Redaction.Total, len(secrets))
	}
	t.Logf("redactions: %d %v", m.Redaction.Total, m.Redaction.Rules)
}

func containsAny(files map[string][]byte, prefix, text string) bool {
	for name, b := range files {
		if strings.HasPrefix(name, prefix) && bytes.Contains(b, []byte(text)) {
			return true
		}
	}
	return false
}
