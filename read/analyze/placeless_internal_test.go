package analyze

import "testing"

// A pod-local volume's name is found only as a whole name of a pod's
// volume.
func TestNamesVolumeOfPod(t *testing.T) {
	for _, c := range []struct {
		text, v string
		want    bool
	}{
		{"mount of volume data of pod shop/db-0 fails", "data", true},
		{"data of pod shop/db-0", "data", true},
		{"(its lines name metadata of pod shop/db-0)", "data", false},
		{"(its lines name metadata of pod a, data of pod b)", "data", true},
		{"pod shop/db-0 waits for its volumes", "data", false},
		{"postgres-data of pod x", "data", false},
	} {
		if got := namesVolumeOfPod(c.text, c.v); got != c.want {
			t.Errorf("namesVolumeOfPod(%q, %q) = %v, want %v", c.text, c.v, got, c.want)
		}
	}
}
