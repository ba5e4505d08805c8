package nodeconfig_test

import (
	"reflect"
	"testing"

	"github.com/nodesnap/nodesnap/collectors/nodeconfig"
)

func TestConfigPathsFromCmdline(t *testing.T) {
	kubelet := []string{"--config", "--kubeconfig", "--bootstrap-kubeconfig"}
	cases := []struct {
		name  string
		args  []string
		flags []string
		cwd   string
		want  []nodeconfig.FlagValue
	}{
		{"equals and space", []string{"/usr/bin/kubelet", "--config=/var/lib/kubelet/config.yaml", "--kubeconfig", "/etc/kubernetes/kubelet.conf", "--v=2"}, kubelet, "",
			[]nodeconfig.FlagValue{{Flag: "--config", Value: "/var/lib/kubelet/config.yaml"}, {Flag: "--kubeconfig", Value: "/etc/kubernetes/kubelet.conf"}}},
		{"a flag that only starts the same is not it", []string{"kubelet", "--config-dir=/etc/kubelet.d", "--kubeconfig-x=/a"}, kubelet, "", nil},
		{"short flag", []string{"containerd", "-c", "/etc/containerd/alt.toml"}, []string{"--config", "-c"}, "",
			[]nodeconfig.FlagValue{{Flag: "-c", Value: "/etc/containerd/alt.toml"}}},
		{"relative joined to cwd, cleaned", []string{"containerd", "--config", "../etc/c.toml"}, []string{"--config", "-c"}, "/opt/run",
			[]nodeconfig.FlagValue{{Flag: "--config", Value: "/opt/etc/c.toml"}}},
		{"relative without cwd dropped", []string{"containerd", "--config", "c.toml"}, []string{"--config"}, "", nil},
		{"flag last without value", []string{"kubelet", "--config"}, kubelet, "", nil},
		{"empty value", []string{"kubelet", "--config="}, kubelet, "", nil},
		{"argv[0] is never a flag", []string{"--config=/x"}, kubelet, "", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := nodeconfig.ConfigPathsFromCmdline(tc.args, tc.flags, tc.cwd)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func FuzzConfigPathsFromCmdline(f *testing.F) {
	f.Add("kubelet\x00--config=/a\x00--kubeconfig\x00b", "/cwd")
	f.Fuzz(func(t *testing.T, argv, cwd string) {
		args := splitNUL(argv)
		for _, fv := range nodeconfig.ConfigPathsFromCmdline(args, []string{"--config", "-c", "--kubeconfig"}, cwd) {
			if fv.Value == "" || fv.Value[0] != '/' {
				t.Fatalf("a non-absolute path %q from %q", fv.Value, args)
			}
		}
	})
}

func splitNUL(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}
