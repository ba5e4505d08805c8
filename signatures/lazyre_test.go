package signatures

import "testing"

// TestKeyRegexpsCompile compiles every class's key expression, which
// the package no longer compiles at init: a bad one fails here, not on
// the first line keyed in a customer's bundle.
func TestKeyRegexpsCompile(t *testing.T) {
	n := 0
	for i := range Classes {
		c := &Classes[i]
		if c.KeyRe == nil {
			continue
		}
		n++
		re := c.KeyRe.Regexp()
		if re.String() != c.KeyRe.String() {
			t.Errorf("class %s: compiled %q from %q", c.ID, re.String(), c.KeyRe.String())
		}
		if re.NumSubexp() < 1 {
			t.Errorf("class %s: key expression %q has no group to take the key from", c.ID, c.KeyRe)
		}
	}
	if n == 0 {
		t.Fatal("no class has a key expression: the test checks nothing")
	}
	if reVerb().String() == "" {
		t.Error("the printf verb expression is empty")
	}
}
