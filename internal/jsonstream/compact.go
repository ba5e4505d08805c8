package jsonstream

import (
	"fmt"
	"io"
)

// MaxToken bounds one string, number or literal in a document read
// through Compact: nodesnap writes none near it (the longest are command
// line arguments, at most 128 KiB each by the kernel's MAX_ARG_STRLEN),
// and a hostile one would be held whole, and copied as it grows, by the
// decoder.
const MaxToken = 8 << 20

// Compact returns a reader of r's JSON with every run of white space
// between tokens cut to one space, and an error for a token longer than
// MaxToken.
//
// encoding/json's Decoder does not consume white space it has looked at
// until a value follows: it scans the whole run again after every refill
// of its buffer, and keeps it all in memory. A file of a few hundred MiB
// of spaces (a few hundred KiB compressed) kept a reader busy for minutes.
// White space outside strings means nothing, so cutting it changes no
// value; inside strings every byte is kept.
func Compact(r io.Reader) io.Reader { return &compact{r: r} }

type compact struct {
	r         io.Reader
	inString  bool
	escaped   bool
	lastSpace bool
	token     int64 // bytes of the current string, number or literal
	err       error
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func (c *compact) Read(p []byte) (int, error) {
	for {
		if c.err != nil {
			return 0, c.err
		}
		n, err := c.r.Read(p)
		w := 0
		for _, b := range p[:n] {
			switch {
			case c.inString:
				switch {
				case c.escaped:
					c.escaped = false
				case b == '\\':
					c.escaped = true
				case b == '"':
					c.inString = false
				}
				c.token++
			case isSpace(b):
				c.token = 0
				if c.lastSpace {
					continue
				}
				c.lastSpace = true
				p[w] = ' '
				w++
				continue
			case b == '"':
				c.inString, c.token = true, 1
			case b == '{' || b == '}' || b == '[' || b == ']' || b == ',' || b == ':':
				c.token = 0
			default:
				c.token++ // a number or a literal
			}
			if c.token > MaxToken {
				c.err = fmt.Errorf("%w: a value longer than %d bytes (nodesnap writes none)", ErrMalformed, MaxToken)
				return w, nil // what came before; the error on the next read
			}
			c.lastSpace = false
			p[w] = b
			w++
		}
		if err != nil {
			c.err = err
		}
		if w > 0 || err != nil || n == 0 {
			return w, err
		}
		// Only white space already sent: read on rather than return 0.
	}
}
