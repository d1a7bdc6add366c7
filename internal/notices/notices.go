// Package notices receives the notices fairq processes publish to each
// other on a Redis Pub/Sub channel: a worker leaving the fleet (package
// fleet), a semaphore slot given back (package throttle). A notice only
// hastens what the processes would find out anyway, at their next
// heartbeat or ask, so a notice lost while the connection is down is no
// loss.
package notices

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// Each calls f with the payload of each message sub receives, in order,
// until ctx ends or sub is closed, then closes sub. go-redis subscribes
// again after a lost connection; what was published meanwhile is not
// received.
func Each(ctx context.Context, sub *redis.PubSub, f func(payload string)) {
	defer func() { _ = sub.Close() }() // a closing connection has nothing to report
	ch := sub.Channel()
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-ch:
			if !ok {
				return
			}
			f(m.Payload)
		}
	}
}
