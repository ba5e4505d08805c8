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
