package keyslot

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Slots is the number of hash slots of a Redis Cluster.
const Slots = 16384

// Slot returns key's hash slot: CRC16 of its hash tag, the text between
// the first '{' and the first '}' after it when that is not empty, or of
// the whole key, modulo Slots.
func Slot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key) % Slots)
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial value 0, no
// reflection), the checksum Redis Cluster hashes keys with.
func crc16(s string) uint16 {
	var crc uint16
	for i := range len(s) {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// Check returns an error naming every group, by its name, whose keys are
// not all in one slot, with each key's slot; nil when every group is in
// one.
func Check(groups map[string][]string) error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(groups)) {
		keys := groups[name]
		if len(keys) == 0 {
			errs = append(errs, fmt.Errorf("group %s has no keys", name))
			continue
		}
		first := Slot(keys[0])
		for _, k := range keys[1:] {
			if Slot(k) != first {
				errs = append(errs, fmt.Errorf("group %s spans several slots: %s", name, describe(keys)))
				break
			}
		}
	}
	return errors.Join(errs...)
}

func describe(keys []string) string {
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%q in %d", k, Slot(k))
	}
	return strings.Join(parts, ", ")
}
