package kubelet_test

import (
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/collectors/kubelet"
)

func TestKubeletForbiddenUser(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"Forbidden (user=system:node:node-1, verb=get, resource=nodes, subresource=proxy)", "system:node:node-1"},
		{"Forbidden (user=system:serviceaccount:monitoring:nodesnap, verb=get, resource=nodes, subresource=metrics)", "system:serviceaccount:monitoring:nodesnap"},
		{"Forbidden (user=jane@example.com, verb=get, resource=nodes, subresource=proxy)", "jane@example.com"},
		{"Forbidden (user=, verb=get, resource=nodes, subresource=proxy)", ""},
		{"Forbidden (user=a b, verb=get)", ""},              // not a name to paste into a command
		{"Forbidden (user=x; rm -rf /, verb=get)", ""},      // nor this
		{"Forbidden (user=system:node:node-1 no verb)", ""}, // cut short
		{"Forbidden", ""},    // no identity named
		{"Unauthorized", ""}, // not a 403
		{"Forbidden (user=" + strings.Repeat("a", 254) + ", verb=get)", ""}, // longer than a name can be
	} {
		if got := kubelet.KubeletForbiddenUser(tc.in); got != tc.want {
			t.Errorf("KubeletForbiddenUser(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func FuzzKubeletForbiddenUser(f *testing.F) {
	f.Add("Forbidden (user=system:node:node-1, verb=get, resource=nodes, subresource=proxy)")
	f.Add("(user=, verb=")
	f.Add("(user=a\x00b, verb=")
	f.Fuzz(func(t *testing.T, s string) {
		u := kubelet.KubeletForbiddenUser(s)
		if u == "" {
			return
		}
		if !strings.Contains(s, "(user="+u+", verb=") || len(u) > 253 {
			t.Fatalf("%q from %q", u, s)
		}
		if strings.ContainsAny(u, " \t\n;&|$`'\"()<>\\/") {
			t.Fatalf("%q is not safe to show in a command line", u)
		}
	})
}

func TestKubeletDescriptor(t *testing.T) {
	for _, tc := range []struct {
		in   string
		fd   int
		want bool
	}{
		{"/dev/stdin", 0, true},
		{"/dev/fd/63", 63, true},
		{"/dev/fd/0", 0, true},
		{"/proc/self/fd/7", 7, true},
		{"/proc/thread-self/fd/9", 9, true},
		{"/dev//fd/./63", 63, true},
		{"/dev/fd/063", 0, false}, // not how a shell names a descriptor
		{"/dev/fd/-1", 0, false},
		{"/dev/fd/99999999999999999999", 0, false},
		{"/dev/fd/", 0, false},
		{"/dev/fd/63/x", 0, false},
		{"/var/run/secrets/token", 0, false},
		{"dev/fd/3", 0, false}, // relative: a file of that name
		{"/host/dev/fd/3", 0, false},
		{"", 0, false},
	} {
		fd, ok := kubelet.KubeletDescriptor(tc.in)
		if ok != tc.want || fd != tc.fd {
			t.Errorf("KubeletDescriptor(%q) = %d, %v; want %d, %v", tc.in, fd, ok, tc.fd, tc.want)
		}
	}
}

func FuzzKubeletDescriptor(f *testing.F) {
	for _, s := range []string{"/dev/stdin", "/dev/fd/63", "/proc/self/fd/1", "/dev/fd/+1", "/dev/fd/1e3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fd, ok := kubelet.KubeletDescriptor(s)
		if !ok {
			if fd != 0 {
				t.Fatalf("%q: fd %d without ok", s, fd)
			}
			return
		}
		if fd < 0 || fd > 1<<20 {
			t.Fatalf("%q: fd %d out of range", s, fd)
		}
		if !strings.HasPrefix(s, "/") {
			t.Fatalf("%q: a relative path taken for a descriptor", s)
		}
	})
}
