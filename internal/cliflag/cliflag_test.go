package cliflag

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func testFlags() *pflag.FlagSet {
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	fs.String("upload", "", "")
	fs.StringP("kubelet-token", "k", "", "")
	fs.String("label", "", "")
	MarkURL(fs, "upload")
	MarkSecret(fs, "kubelet-token")
	return fs
}

func TestRecordArgs(t *testing.T) {
	fs := testFlags()
	for _, c := range []struct{ in, want string }{
		{"nodesnap collect --upload https://u:pw@h.example/p/q?X-Amz-Signature=s3cr3t#frag --upload=https://h.example/x?sig=abc --upload ::bad",
			"nodesnap collect --upload https://h.example/p/q?… --upload=https://h.example/x?… --upload [REDACTED]"},
		{"nodesnap collect --kubelet-token abc --kubelet-token=def -k ghi --label x",
			"nodesnap collect --kubelet-token [REDACTED] --kubelet-token=[REDACTED] -k [REDACTED] --label x"},
		// A flag not marked keeps its value; a value that looks like a
		// flag name is still the value.
		{"nodesnap collect --label --kubelet-token", "nodesnap collect --label --kubelet-token"},
	} {
		got := strings.Join(RecordArgs(fs, strings.Fields(c.in)), " ")
		if got != c.want {
			t.Errorf("RecordArgs(%q)\n got %q\nwant %q", c.in, got, c.want)
		}
	}
	secret, urls := Marked(fs)
	if strings.Join(secret, ",") != "kubelet-token" || strings.Join(urls, ",") != "upload" {
		t.Errorf("Marked = %v, %v", secret, urls)
	}
}

// Marking a flag that does not exist is a programming error, caught at once.
func TestMarkMissingFlagPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("MarkSecret of a missing flag did not panic")
		}
	}()
	MarkSecret(pflag.NewFlagSet("t", pflag.ContinueOnError), "token")
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{
		"0": 0, "1048576": 1 << 20, "512KiB": 512 << 10, "64mib": 64 << 20, "1G": 1 << 30, "2MB": 2e6, "3 KiB": 3 << 10, "7B": 7, "1TiB": 1 << 40,
	} {
		if n, err := ParseBytes(in); err != nil || n != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, n, err, want)
		}
	}
	for _, bad := range []string{"", "-1", "x", "1.5MiB", "99999999999GiB", "KiB", "+5", "1 2"} {
		if n, err := ParseBytes(bad); err == nil {
			t.Errorf("ParseBytes(%q) = %d, accepted", bad, n)
		}
	}
	for n, want := range map[int64]string{0: "0", 1000: "1000", 1 << 10: "1KiB", 1536: "1536", 64 << 20: "64MiB", 1 << 30: "1GiB"} {
		if got := FormatBytes(n); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

// Whatever ParseBytes accepts, FormatBytes gives back a string it reads
// as the same size.
func FuzzParseBytes(f *testing.F) {
	for _, s := range []string{"0", "512KiB", "1g", "2MB", "99999999999GiB", " 3 tib "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseBytes(s)
		if err != nil {
			return
		}
		if n < 0 {
			t.Fatalf("ParseBytes(%q) = %d", s, n)
		}
		back, err := ParseBytes(FormatBytes(n))
		if err != nil || back != n {
			t.Errorf("ParseBytes(FormatBytes(%d)) = %d, %v", n, back, err)
		}
	})
}

// Marked returns, for the tests, the long names of the flags of fs marked secret and
// marked URL.
func Marked(fs *pflag.FlagSet) (secret, urls []string) {
	fs.VisitAll(func(f *pflag.Flag) {
		if _, ok := f.Annotations[annotationSecret]; ok {
			secret = append(secret, f.Name)
		}
		if _, ok := f.Annotations[annotationURL]; ok {
			urls = append(urls, f.Name)
		}
	})
	return secret, urls
}

// HiddenValues are what RecordArgs hides, as values the collection masks
// wherever they appear.
func TestHiddenValues(t *testing.T) {
	fs := testFlags()
	for _, c := range []struct {
		in   string
		want []string // each must be among the hidden values
		not  []string // none may be
	}{
		{"nodesnap collect --upload https://u:pw1234@h.example/p/q?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=s3cr3tsig&X-Amz-Expires=3600 --label case-7",
			[]string{"pw1234", "s3cr3tsig", "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=s3cr3tsig&X-Amz-Expires=3600"},
			[]string{"AWS4-HMAC-SHA256", "3600", "case-7", "h.example", "/p/q"}},
		{"nodesnap collect --kubelet-token=abcdef123 -k ghijkl456 --upload=https://h.example/x?sig=abc%2Bdef#frag",
			[]string{"abcdef123", "ghijkl456", "abc%2Bdef", "abc+def", "frag"},
			[]string{"https://h.example/x"}},
		{"nodesnap collect --label x", nil, []string{"x", "--label"}},
	} {
		got := HiddenValues(fs, strings.Fields(c.in))
		has := map[string]bool{}
		for _, v := range got {
			has[v] = true
		}
		for _, w := range c.want {
			if !has[w] {
				t.Errorf("HiddenValues(%q) = %q: %q missing", c.in, got, w)
			}
		}
		for _, n := range c.not {
			if has[n] {
				t.Errorf("HiddenValues(%q) = %q: %q is no secret", c.in, got, n)
			}
		}
	}
}
