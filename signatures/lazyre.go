package signatures

import (
	"regexp"
	"sync"
)

// KeyRegexp is a class's key expression, compiled the first time a line
// is keyed with it. Classes is a package variable: compiling its
// expressions at init made every process of the binary (each collector
// and isolation worker, which never key a line) pay for them.
type KeyRegexp struct {
	src  string
	once sync.Once
	re   *regexp.Regexp
}

// keyRe returns the key expression src, compiled on first use. src is a
// constant of this package: TestKeyRegexpsCompile compiles every class's.
func keyRe(src string) *KeyRegexp { return &KeyRegexp{src: src} }

// Regexp is the compiled expression.
func (k *KeyRegexp) Regexp() *regexp.Regexp {
	k.once.Do(func() { k.re = regexp.MustCompile(k.src) })
	return k.re
}

// String is the expression's source.
func (k *KeyRegexp) String() string { return k.src }

// FindSubmatch is regexp.Regexp's FindSubmatch.
func (k *KeyRegexp) FindSubmatch(b []byte) [][]byte { return k.Regexp().FindSubmatch(b) }
