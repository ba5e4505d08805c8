package nodeconfig_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/engine/supervisor/supervisortest"
)

// A --config-file that names a file the collector reads anyway (or names
// one file twice, spelled two ways) is read once: the collector stays ok
// and the bundle holds one copy. It used to fail the whole collector with
// "written twice" and mark the bundle partial.
func TestConfigFileNamedTwice(t *testing.T) {
	root := t.TempDir()
	cfg := filepath.Join(root, "var/lib/kubelet/config.yaml")
	if err := os.MkdirAll(filepath.Dir(cfg), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte("kind: KubeletConfiguration\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	extra := filepath.Join(root, "etc/extra.conf")
	os.MkdirAll(filepath.Dir(extra), 0o755)
	if err := os.WriteFile(extra, []byte("x = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	supervisortest.Flags(t, "nodeconfig", "--config-file", "/var/lib/kubelet/config.yaml",
		"--config-file", "/etc/extra.conf", "--config-file", "/etc//extra.conf")
	b := supervisortest.Collect(t, "nodeconfig", collectors.Common{Root: root})
	if b.Res.Status != bundle.StatusOK {
		t.Fatalf("nodeconfig: %s (%s), want ok", b.Res.Status, b.Res.Error)
	}
	for _, f := range []string{"nodeconfig/files/var/lib/kubelet/config.yaml", "nodeconfig/files/etc/extra.conf"} {
		if got := string(b.File(t, f)); got == "" {
			t.Errorf("%s is empty or missing", f)
		}
	}
}
