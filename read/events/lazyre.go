package events

import (
	"regexp"
	"sync"
)

// lazyRegexp is a regular expression compiled the first time it is used.
// Every process of the binary pays this package's init: the collect side
// re-executes it for each collector and each isolation worker, and almost
// none of those processes classifies a log record. Compiling the
// package's expressions at init cost each of them about 4.5 ms of CPU
// (`GODEBUG=inittrace=1 nodesnap version`).
type lazyRegexp struct {
	once sync.Once
	src  string
	re   *regexp.Regexp
}

// lazyAll lists every lazy expression, for the test that compiles them.
var lazyAll []*lazyRegexp

// lazy returns the expression src, compiled on first use. src is a
// constant of this package: TestLazyRegexpsCompile compiles every one.
func lazy(src string) *lazyRegexp {
	l := &lazyRegexp{src: src}
	lazyAll = append(lazyAll, l)
	return l
}

func (l *lazyRegexp) get() *regexp.Regexp {
	l.once.Do(func() { l.re = regexp.MustCompile(l.src) })
	return l.re
}

// String is the expression's source, as regexp.Regexp's String.
func (l *lazyRegexp) String() string { return l.src }

func (l *lazyRegexp) MatchString(s string) bool { return l.get().MatchString(s) }
func (l *lazyRegexp) Match(b []byte) bool       { return l.get().Match(b) }
func (l *lazyRegexp) FindString(s string) string {
	return l.get().FindString(s)
}
func (l *lazyRegexp) FindStringSubmatch(s string) []string {
	return l.get().FindStringSubmatch(s)
}
func (l *lazyRegexp) FindStringSubmatchIndex(s string) []int {
	return l.get().FindStringSubmatchIndex(s)
}
func (l *lazyRegexp) FindSubmatch(b []byte) [][]byte { return l.get().FindSubmatch(b) }
func (l *lazyRegexp) FindAllString(s string, n int) []string {
	return l.get().FindAllString(s, n)
}
func (l *lazyRegexp) FindAllStringIndex(s string, n int) [][]int {
	return l.get().FindAllStringIndex(s, n)
}
func (l *lazyRegexp) FindAllStringSubmatchIndex(s string, n int) [][]int {
	return l.get().FindAllStringSubmatchIndex(s, n)
}
