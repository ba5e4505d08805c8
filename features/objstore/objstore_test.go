package objstore

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		in, bucket, prefix string
		bad                bool
	}{
		{in: "s3://bundles/", bucket: "bundles"},
		{in: "s3://bundles", bucket: "bundles"},
		{in: "s3://bundles/case-123/", bucket: "bundles", prefix: "case-123/"},
		{in: "s3://bundles/case-123", bucket: "bundles", prefix: "case-123/"},
		{in: "S3://my.bucket-1/a/b/c/", bucket: "my.bucket-1", prefix: "a/b/c/"},
		{in: "https://bundles/x", bad: true},
		{in: "s3://", bad: true},
		{in: "s3:///x", bad: true},
		{in: "s3://Bundles/x", bad: true},
		{in: "s3://b/x", bad: true},
		{in: "s3://-bundles/x", bad: true},
		{in: "s3://bun..dles/x", bad: true},
		{in: "s3://bundles/a//b", bad: true},
		{in: "s3://bundles/a/../b", bad: true},
		{in: "s3://bundles/a?X-Amz-Signature=1", bad: true},
		{in: "s3://bundles/a#f", bad: true},
		{in: "s3://bundles/a\nb", bad: true},
		{in: "s3://bundles/" + strings.Repeat("a", 900), bad: true},
	} {
		loc, err := ParseURL(tc.in)
		if tc.bad {
			if err == nil || !errors.Is(err, ErrLocation) {
				t.Errorf("ParseURL(%q) = %+v, %v; want an ErrLocation", tc.in, loc, err)
			}
			continue
		}
		if err != nil || loc.Bucket != tc.bucket || loc.Prefix != tc.prefix {
			t.Errorf("ParseURL(%q) = %+v, %v; want %s %q", tc.in, loc, err, tc.bucket, tc.prefix)
		}
		if again, err := ParseURL(loc.String()); err != nil || again != loc {
			t.Errorf("ParseURL(%q) = %+v, %v; not the same place", loc.String(), again, err)
		}
	}
}

func FuzzParseURL(f *testing.F) {
	for _, s := range []string{"s3://bundles/case/", "s3://a.b-c/x/y", "s3://", "s3://b/../", "s3://bb/?x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		loc, err := ParseURL(s)
		if err != nil {
			return
		}
		if loc.Prefix != "" && !strings.HasSuffix(loc.Prefix, "/") {
			t.Fatalf("%q: prefix %q is not a folder", s, loc.Prefix)
		}
		if strings.ContainsAny(loc.String(), "?#\n\r\x00") || strings.Contains(loc.Prefix, "//") {
			t.Fatalf("%q gave %q", s, loc.String())
		}
		if again, err := ParseURL(loc.String()); err != nil || again != loc {
			t.Fatalf("%q: %+v does not read back (%+v, %v)", s, loc, again, err)
		}
	})
}

func TestPlan(t *testing.T) {
	for _, tc := range []struct {
		size, part int64
		n          int
		last       int64
	}{
		{0, 5 << 20, 1, 0},
		{1, 5 << 20, 1, 1},
		{40 << 20, 5 << 20, 8, 5 << 20},
		{40<<20 + 1, 5 << 20, 9, 1},
		{6 << 30, 16 << 20, 384, 16 << 20},
		{200 << 30, 5 << 20, 10000, -1}, // part size raised to fit 10,000 parts
	} {
		ps := plan(tc.size, tc.part)
		var total int64
		for i, p := range ps {
			if p.num != int32(i+1) || p.off != total {
				t.Fatalf("size %d: part %d is %+v", tc.size, i, p)
			}
			total += p.len
		}
		if total != tc.size || len(ps) > tc.n || (tc.last >= 0 && (len(ps) != tc.n || ps[len(ps)-1].len != tc.last)) {
			t.Errorf("size %d in %d: %d parts, last %d, total %d; want %d parts, last %d", tc.size, tc.part, len(ps), ps[len(ps)-1].len, total, tc.n, tc.last)
		}
	}
}

func TestReadPolicyRefusesDamage(t *testing.T) {
	good := `{"version":1,"location":"s3://b1b/p/","url":"https://s3.example.com/b1b","key_prefix":"p/","fields":{"policy":"eyJ9","X-Amz-Signature":"abc","X-Amz-Credential":"AK/x"},"expires":"2030-01-01T00:00:00Z","max_size":100}`
	if p, err := ReadPolicy(strings.NewReader(good)); err != nil || p.KeyPrefix != "p/" {
		t.Fatalf("a good policy: %+v, %v", p, err)
	}
	for name, bad := range map[string]string{
		"query":     strings.Replace(good, `b1b"`, `b1b?X-Amz-Signature=secretvalue"`, 1),
		"version":   strings.Replace(good, `"version":1`, `"version":2`, 1),
		"key field": strings.Replace(good, `"policy":`, `"key":"x","policy":`, 1),
		"newline":   strings.Replace(good, `"abc"`, `"a\nb"`, 1),
		"no sig":    strings.Replace(good, `"X-Amz-Signature":"abc",`, ``, 1),
		"not json":  `policy`,
		"scheme":    strings.Replace(good, `https://`, `file://`, 1),
	} {
		if _, err := ReadPolicy(strings.NewReader(bad)); err == nil {
			t.Errorf("%s: accepted", name)
		} else if strings.Contains(err.Error(), "secretvalue") || strings.Contains(err.Error(), "eyJ9") {
			t.Errorf("%s: the error quotes a credential: %v", name, err)
		}
	}
}

func FuzzReadPolicy(f *testing.F) {
	f.Add(`{"version":1,"url":"https://h/b","key_prefix":"p/","fields":{"policy":"x","X-Amz-Signature":"y"},"expires":"2030-01-01T00:00:00Z"}`)
	f.Add(`{}`)
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ReadPolicy(strings.NewReader(s))
		if err != nil {
			return
		}
		if p.Fields["policy"] == "" || strings.ContainsAny(p.KeyPrefix, "\r\n\x00") || p.MaxSize <= 0 {
			t.Fatalf("accepted %q as %+v", s, p)
		}
	})
}

// A transport error's message, which the SDK makes from the request URL,
// reaches the user without the URL's query.
func TestErrorsCarryNoQuery(t *testing.T) {
	inner := &url.Error{Op: "Put", URL: "http://127.0.0.1:9/bundles/k?partNumber=4&uploadId=u-secret&X-Amz-Signature=s-secret", Err: errors.New("write: connection reset by peer")}
	err := explain(fmt.Errorf("operation error S3: UploadPart, request send failed, %w", inner), Location{Bucket: "bundles"})
	if strings.Contains(err.Error(), "secret") || !strings.Contains(err.Error(), "127.0.0.1:9") || !strings.Contains(err.Error(), "connection reset") {
		t.Errorf("explain: %q", err)
	}
	if !errors.Is(err, inner) {
		t.Error("the SDK's error is no longer wrapped")
	}
	if got := withoutQueries(`Put "https://h/b/k?X-Amz-Signature=abc": EOF`); strings.Contains(got, "abc") {
		t.Errorf("withoutQueries: %q", got)
	}
}
