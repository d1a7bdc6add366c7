// Package loadtest holds fairq's load tests as users run them: k6 scripts
// (k6/), a wrk script (wrk/), the bare net/http server the gateway is
// measured against (baseline/), and the scripts that run them against a
// local system and report figures for BENCHMARKS.md.
package loadtest
