// Package testenv starts the real services fairq's tests run against: a
// redis-server and the fauxqs SQS emulator, each on a free
// loopback port, started lazily by the first test that asks for it and
// shared by every test of the binary. Tests keep apart by prefixing their
// queue names and Redis keys with Prefix. A test of how fairq rides out a
// Redis failover starts a topology of its own and takes nodes away: a
// Redis Cluster (NewRedisCluster), or a primary with a replica watched by
// three Redis Sentinels (NewRedisSentinel).
//
// A package that uses it calls Main from its TestMain, which stops the
// processes after the tests:
//
//	func TestMain(m *testing.M) { testenv.Main(m) }
//
// or, with a goroutine-leak check made after the processes are stopped,
//
//	func TestMain(m *testing.M) { testenv.Main(m, testenv.VerifyNoLeaks()) }
//
// When a service cannot be run because something is missing (redis-server
// or node not on PATH, fauxqs not installed under the module root's
// node_modules), the test asking for it is skipped with a message naming
// what is missing; with FAIRQ_REQUIRE_SERVICES=1 (as in CI) it fails
// instead. `make test` installs both. A service that is there but does not
// start fails the test either way, with the tail of the process's output.
//
// The processes die with the test binary even when it is killed: redis-server
// through the parent-death signal (Linux), the emulator's launcher
// (fauxqs.mjs) when its standard input, a pipe from the test binary, closes.
package testenv
