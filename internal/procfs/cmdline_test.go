package procfs

import (
	"reflect"
	"testing"
)

func TestParseCmdline(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
	}{
		{"kernel thread", "", nil},
		{"only NULs", "\x00\x00", nil},
		{"normal", "/usr/bin/kubelet\x00--config=/var/lib/kubelet/config.yaml\x00-v=2\x00",
			[]string{"/usr/bin/kubelet", "--config=/var/lib/kubelet/config.yaml", "-v=2"}},
		{"no trailing NUL", "sleep\x00100", []string{"sleep", "100"}},
		{"empty argument in the middle", "sh\x00\x00-c\x00", []string{"sh", "", "-c"}},
		{"argument with spaces", "sh\x00-c\x00echo a b\x00", []string{"sh", "-c", "echo a b"}},
		{"setproctitle, padded with NULs", "nginx: master process /usr/sbin/nginx\x00\x00\x00\x00\x00\x00",
			[]string{"nginx:", "master", "process", "/usr/sbin/nginx"}},
		{"setproctitle, no NUL at all", "postgres: checkpointer  ", []string{"postgres:", "checkpointer"}},
		{"single word", "init", []string{"init"}},
		{"whitespace only", "  ", []string{"  "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ParseCmdline([]byte(tt.in)); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
