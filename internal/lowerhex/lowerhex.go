// Package lowerhex reads lower-case hexadecimal: the form of W3C trace
// contexts, where an upper-case digit makes a traceparent invalid, and of
// fairq's and SQS's message ids, where it would make another id.
package lowerhex

// Decode decodes s, of 2*len(dst) digits, into dst. It reports false,
// with dst partly written, if s is of another length or holds anything
// but the digits 0-9 and a-f.
func Decode(dst []byte, s string) bool {
	if len(s) != 2*len(dst) {
		return false
	}
	for i := range dst {
		hi, ok1 := digit(s[2*i])
		lo, ok2 := digit(s[2*i+1])
		if !ok1 || !ok2 {
			return false
		}
		dst[i] = hi<<4 | lo
	}
	return true
}

// Valid reports whether s holds only the digits 0-9 and a-f.
func Valid(s string) bool {
	for i := 0; i < len(s); i++ {
		if _, ok := digit(s[i]); !ok {
			return false
		}
	}
	return true
}

func digit(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}
