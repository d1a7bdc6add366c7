package throttle

// redisRateKey is the Redis key of a rate limit bucket. redis_rate puts its
// own "rate:" in front of what it is given.
func redisRateKey(prefix, key string) string { return prefix + key }
