// Package loadtest holds fairq's load tests as users run them: the k6
// scripts (k6/, run by k6run against a generated configuration), the
// fairness experiment (fairness/, on the harness library in harness/,
// which runs the real binary and accounts for every message; its charts in
// figures/), the chaos suite (chaos/, on the same library: faults injected
// into the real processes, every accepted message accounted for), the
// fleet mode's clients and application as processes of their own
// (clients/, app/), its contention control's burn process (burn/), the
// cost of gateway.send_window on the SQS emulator (sendwindow/, on the
// same library), a wrk script (wrk/), an open-loop generator (rate/), the
// bare net/http server the gateway is measured against (baseline/), and
// the scripts that report figures for BENCHMARKS.md.
//
// compare.sh compares the gateway's throughput at two commits: it builds
// fairq at each in a temporary git worktree, then runs `fairq dev` of the
// first, of the second and the baseline in turn under the same wrk load
// (wrk/enqueue.lua), alternating them round after round, one server at a
// time, and prints each build's requests/s, its ratio to the baseline and
// the second's to the first's, with the load average of each run and the
// server's CPU time per request, which the machine's other work disturbs
// less than the rate:
//
//	make loadtest-compare A=main B=HEAD   # or loadtest/compare.sh main HEAD
package loadtest
