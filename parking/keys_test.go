package parking_test

import (
	"testing"

	"github.com/fairq/fairq/internal/keyslot"
	"github.com/fairq/fairq/parking"
)

func TestRedisKeysShareASlot(t *testing.T) {
	t.Parallel()
	for _, prefix := range []string{"fairq:", "acme-prod:", ""} {
		for _, tenant := range []string{"acme", "globex", ""} {
			if err := keyslot.Check(parking.RedisKeyGroups(prefix, tenant)); err != nil {
				t.Errorf("prefix %q, tenant %q: %v", prefix, tenant, err)
			}
		}
	}
}
