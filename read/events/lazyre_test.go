package events

import (
	"regexp"
	"testing"
)

// Every expression of the package compiles (at init they would have
// failed the binary's start; compiled lazily, a bad one would fail its
// first record), and none is compiled before its first use.
func TestLazyRegexpsCompile(t *testing.T) {
	if len(lazyAll) < 50 {
		t.Fatalf("%d lazy expressions listed; the package declares more than 50", len(lazyAll))
	}
	for _, l := range lazyAll {
		if _, err := regexp.Compile(l.src); err != nil {
			t.Errorf("expression %q: %v", l.src, err)
		}
	}
	l := lazy(`a+b`)
	if l.re != nil {
		t.Fatal("compiled before its first use")
	}
	if !l.MatchString("xaab") || l.FindString("xaab") != "aab" {
		t.Error("a lazy expression does not match as its regexp does")
	}
}
