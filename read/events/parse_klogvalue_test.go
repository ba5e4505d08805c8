package events

import "testing"

// klog's multi-line values (key=< lines >), joined into one record, read
// whole with the keys after them; a value cut before its close is the
// rest of the record; a '<' that opens no block stays a plain value.
func TestKlogMultilineValue(t *testing.T) {
	cases := []struct {
		name, in  string
		want      []field
		wantOther bool
	}{
		{name: "value then keys", in: `err=< error mounting /x: exit status 32 Output: mount: bad > containerName="app" volumeMountName="cache"`,
			want: []field{{"err", "error mounting /x: exit status 32 Output: mount: bad"}, {"containerName", "app"}, {"volumeMountName", "cache"}}},
		{name: "a '>' inside the value is not its close", in: `err=< a->b failed: x>y > k=v`,
			want: []field{{"err", "a->b failed: x>y"}, {"k", "v"}}},
		{name: "close at the end of the record", in: `err=< only line >`,
			want: []field{{"err", "only line"}}},
		{name: "cut before its close", in: `err=< first line of it`,
			want: []field{{"err", "first line of it"}}},
		{name: "the block's first line alone (a journal entry of its own): a plain value", in: `err=<`,
			want: []field{{"err", "<"}}},
		{name: "not a block: <tag>", in: `x=<none> k=v`,
			want: []field{{"x", "<none>"}, {"k", "v"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := logfmt([]byte(c.in))
			if len(got) != len(c.want) {
				t.Fatalf("fields %q, want %q", got, c.want)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Errorf("field %d = %q, want %q", i, got[i], c.want[i])
				}
			}
		})
	}
}
