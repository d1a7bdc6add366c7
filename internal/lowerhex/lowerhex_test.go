package lowerhex_test

import (
	"bytes"
	"testing"

	"github.com/fairq/fairq/internal/lowerhex"
)

func TestDecode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		s    string
		n    int
		want []byte // nil: refused
	}{
		{"00ff7a", 3, []byte{0x00, 0xff, 0x7a}},
		{"", 0, []byte{}},
		{"00FF7A", 3, nil}, // upper case
		{"00ff7", 3, nil},  // short
		{"00ff7a0", 3, nil},
		{"00fg7a", 3, nil},
		{"-0ff7a", 3, nil},
	}
	for _, tt := range tests {
		dst := make([]byte, tt.n)
		ok := lowerhex.Decode(dst, tt.s)
		if ok != (tt.want != nil) || ok && !bytes.Equal(dst, tt.want) {
			t.Errorf("Decode(%q) = %x, %v; want %x, %v", tt.s, dst, ok, tt.want, tt.want != nil)
		}
		if v := lowerhex.Valid(tt.s); tt.want != nil && !v {
			t.Errorf("Valid(%q) = false", tt.s)
		}
	}
	for _, s := range []string{"A", "g", "0x", " 0"} {
		if lowerhex.Valid(s) {
			t.Errorf("Valid(%q) = true", s)
		}
	}
}
