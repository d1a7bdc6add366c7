package schedule

import "strconv"

// Every Redis key of the package, under Config.KeyPrefix.

// leaseKey holds the identity of the leader.
func leaseKey(prefix string) string { return prefix + "cron:leader" }

// firedKey claims one firing of a task: set once by whoever enqueues it.
func firedKey(prefix, task string, unix int64) string {
	return prefix + "cron:fired:" + task + ":" + strconv.FormatInt(unix, 10)
}
