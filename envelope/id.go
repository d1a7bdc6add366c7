package envelope

import (
	"crypto/rand"
	"encoding/hex"
	"time"
)

// IDLength is the length of the ids NewID makes.
const IDLength = 36

// NewID returns a new message id: a UUID version 7 (RFC 9562), the 48-bit
// Unix time in milliseconds of now followed by 74 random bits, in the
// 8-4-4-4-12 hex form of SQS's own message ids. Ids sort by the time they
// were made, which keeps the keys of a store that remembers recent ids
// close together, and two gateways cannot make the same id.
func NewID(now time.Time) string {
	var u [16]byte
	ms := uint64(now.UnixMilli())
	for i := range 6 {
		u[i] = byte(ms >> (40 - 8*i))
	}
	rand.Read(u[6:])        // never fails (crypto/rand)
	u[6] = u[6]&0x0f | 0x70 // version 7
	u[8] = u[8]&0x3f | 0x80 // variant 10
	var s [IDLength]byte
	hex.Encode(s[0:8], u[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], u[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], u[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], u[8:10])
	s[23] = '-'
	hex.Encode(s[24:], u[10:])
	return string(s[:])
}
