package main

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/fairq/fairq/internal/testenv"
)

// A go-redis pool that could not dial (the master a failover test killed)
// probes in the background, a second between tries, and sees that it was
// closed only after the sleep: longer than goleak waits.
func TestMain(m *testing.M) {
	testenv.Main(m, testenv.VerifyNoLeaks(goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial")))
}
