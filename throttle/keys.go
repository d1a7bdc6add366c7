package throttle

// Every Redis key of the package is built here.

// redisRateKey is the Redis key of a rate limit bucket. redis_rate puts its
// own "rate:" in front of what it is given.
func redisRateKey(prefix, key string) string { return prefix + key }

// redisSemaphoreKey is the Redis key of a semaphore: a sorted set of lease
// id → expiry (unix ms, Redis's clock).
func redisSemaphoreKey(prefix, key string) string { return "sem:" + prefix + key }

// redisPacerKey is the Redis key of a pacer's next free turn (unix µs,
// Redis's clock).
func redisPacerKey(prefix, key string) string { return "pace:" + prefix + key }

// redisSemaphoreFreedChannel is the Pub/Sub channel on which semaphores
// under prefix tell each other of the slots they give back.
func redisSemaphoreFreedChannel(prefix string) string { return "sem-freed:" + prefix }

// redisMeterKey is the Redis key of a meter's hash (rate, at, last); one
// key a script, so any key of the Cluster's slots will do.
func redisMeterKey(prefix, key string) string { return "meter:" + prefix + key }

// redisRateBucketKey is the whole Redis key of a rate limit bucket, as
// redis_rate writes it.
func redisRateBucketKey(prefix, key string) string { return "rate:" + redisRateKey(prefix, key) }
