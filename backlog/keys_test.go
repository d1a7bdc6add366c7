package backlog_test

import (
	"testing"

	"github.com/fairq/fairq/backlog"
	"github.com/fairq/fairq/internal/keyslot"
)

func TestRedisKeysShareASlot(t *testing.T) {
	t.Parallel()
	for _, prefix := range []string{"fairq:", "acme-prod:", ""} {
		for _, tenant := range []string{"acme", "globex", "a-b_c-123"} {
			if err := keyslot.Check(backlog.RedisKeyGroups(prefix, tenant)); err != nil {
				t.Errorf("prefix %q, tenant %q: %v", prefix, tenant, err)
			}
		}
	}
}
