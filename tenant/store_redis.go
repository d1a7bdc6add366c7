package tenant

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// redisStore keeps the records in Redis (see keys.go).
type redisStore struct {
	c    redis.UniversalClient
	keys redisKeys
}

var _ store = (*redisStore)(nil)

// putScript stores a record over an expected revision and bumps the
// version: KEYS records, revs, version; ARGV id, rev, record.
var putScript = redis.NewScript(`
local cur = redis.call('HGET', KEYS[2], ARGV[1])
if (cur or '0') ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
redis.call('HINCRBY', KEYS[2], ARGV[1], 1)
redis.call('INCR', KEYS[3])
return 1
`)

func (s *redisStore) version(ctx context.Context) (int64, error) {
	v, err := s.c.Get(ctx, s.keys.version).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return v, nil
}

func (s *redisStore) load(ctx context.Context) (int64, map[string]record, error) {
	var (
		ver  *redis.StringCmd
		recs *redis.MapStringStringCmd
	)
	keys := s.keys.load()
	_, err := s.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		ver = p.Get(ctx, keys[0])
		recs = p.HGetAll(ctx, keys[1])
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	v, err := ver.Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, nil, fmt.Errorf("%w: version: %w", ErrUnavailable, err)
	}
	out := make(map[string]record, len(recs.Val()))
	for id, raw := range recs.Val() {
		var r record
		if err := json.Unmarshal([]byte(raw), &r); err != nil {
			return 0, nil, fmt.Errorf("tenant %q: stored record: %w", id, err)
		}
		out[id] = r
	}
	return v, out, nil
}

func (s *redisStore) get(ctx context.Context, id string) (stored, error) {
	var rec, rev *redis.StringCmd
	keys := s.keys.get()
	_, err := s.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		rec = p.HGet(ctx, keys[0], id)
		rev = p.HGet(ctx, keys[1], id)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return stored{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	raw, err := rec.Result()
	if errors.Is(err, redis.Nil) {
		return stored{}, nil
	}
	// A record without a revision was stored by a release before this
	// layout (see keys.go): it is at revision 0, which putScript reads
	// for a missing one, so that its first change here still compares
	// and swaps.
	n, err := rev.Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return stored{}, fmt.Errorf("tenant %q: stored revision: %w", id, err)
	}
	var r record
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		return stored{}, fmt.Errorf("tenant %q: stored record: %w", id, err)
	}
	return stored{rec: r, rev: n, found: true}, nil
}

func (s *redisStore) put(ctx context.Context, id string, rev int64, rec record) (bool, error) {
	n, err := putScript.Run(ctx, s.c, s.keys.put(), id, strconv.FormatInt(rev, 10), encodeRecord(rec)).Int()
	if err != nil {
		return false, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return n == 1, nil
}
