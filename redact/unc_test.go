package redact

import (
	"strings"
	"testing"
)

// CIFS sources and fstab lines name credentials as //user:password@server,
// with no scheme; paths with "//" inside stay untouched.
func TestUNCCredentials(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"//svc:S3cret@files.example.com/share /mnt/share cifs", "//svc:" + Marker + "@files.example.com/share /mnt/share cifs"},
		{`source="//svc:S3cret@files/share"`, `source="//svc:` + Marker + `@files/share"`},
		{"mounted //files.example.com/share on /mnt", "mounted //files.example.com/share on /mnt"},
		{"/var/lib//kubelet/pods@x", "/var/lib//kubelet/pods@x"},
		{"https://user:pw@host/x", "https://user:" + Marker + "@host/x"},
	} {
		got, _ := Default().String(tc.in)
		if got != tc.want {
			t.Errorf("%q:\n got %q\nwant %q", tc.in, got, tc.want)
		}
		if strings.Contains(got, "S3cret") {
			t.Errorf("%q: secret survived", tc.in)
		}
	}
}
