package cliflag

import "fmt"

// PositiveSize is ByteSize for a size that must be above 0 (ParseBytes):
// 1048576, 512KiB, 32MiB, 1GiB.
type PositiveSize int64

// String is the size as a flag shows it.
func (s *PositiveSize) String() string { return FormatBytes(int64(*s)) }

// Type is the flag's kind in help.
func (s *PositiveSize) Type() string { return "size" }

// Set parses a size.
func (s *PositiveSize) Set(v string) error {
	n, err := ParsePositiveSize(v)
	if err != nil {
		return err
	}
	*s = PositiveSize(n)
	return nil
}

// ParsePositiveSize parses a size above 0.
func ParsePositiveSize(v string) (int64, error) {
	n, err := ParseBytes(v)
	if err == nil && n == 0 {
		err = fmt.Errorf("%q: the size must be above 0", v)
	}
	return n, err
}
