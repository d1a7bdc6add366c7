// Package loadtest holds fairq's load tests as users run them: the k6
// scripts (k6/, run by k6run against a generated configuration), the
// fairness experiment (fairness/, on the harness library in harness/,
// which runs the real binary and accounts for every message; its charts in
// figures/), the chaos suite (chaos/, on the same library: faults injected
// into the real processes, every accepted message accounted for), a wrk
// script (wrk/), an open-loop generator (rate/), the bare net/http server
// the gateway is measured against (baseline/), and the scripts that report
// figures for BENCHMARKS.md.
package loadtest
