package deploy_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/test/testkit"
)

// imageRef finds a reference to nodesnap's image with its tag.
var imageRef = regexp.MustCompile(`[a-z0-9.-]+\.[a-z]+/nodesnap(?:/nodesnap)?:(<[^>]+>|[^\s'"|\x60),<]+)`)

// placeholderTag is a tag that is clearly one: the reader puts in theirs.
var placeholderTag = regexp.MustCompile(`^(VERSION|<[a-z ]+>)$`)

// The docs, the manifests and every command's help name the image by a
// placeholder (VERSION) or the version of the binary at hand, never a
// tag no build makes (v0.1.0 was named while the repository had no tag).
func TestImageTagsAreWhatABuildMakes(t *testing.T) {
	texts := map[string]string{}
	for _, glob := range []string{"../README.md", "../docs/*.md", "../docs/reference/*.md", "kubernetes/*.yaml"} {
		files, _ := filepath.Glob(glob)
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			texts[f] = string(b)
		}
	}
	bin := testkit.Binary(t)
	for _, args := range [][]string{{"explain", "--help"}, {"fleet", "collect", "--help"}, {"manifests", "job"}, {"manifests", "daemonset"}} {
		out, err := exec.Command(bin, args...).Output()
		if err != nil {
			t.Fatalf("nodesnap %v: %v", args, err)
		}
		texts["nodesnap "+strings.Join(args, " ")] = string(out)
	}
	if len(texts) < 10 {
		t.Fatalf("only %d texts read", len(texts))
	}
	for where, text := range texts {
		for _, m := range imageRef.FindAllStringSubmatch(text, -1) {
			if !placeholderTag.MatchString(m[1]) {
				t.Errorf("%s names the image %s: a tag no build makes; use VERSION (or <this version>)", where, m[0])
			}
		}
	}
}
