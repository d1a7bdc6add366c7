// k6: a noisy neighbour at the front door. The quiet tenants send at a
// steady rate inside their limits; one tenant sends at 100 times a quiet
// tenant's rate, far over its ingest_rate. The noisy tenant is refused
// with 429 (rate_limited) for what exceeds its limit; the quiet tenants
// must not notice: their enqueues are accepted, as fast as without it.
//
//   go run ./loadtest/k6run -script noisy
//
// Options (-e): RATE per quiet tenant (msg/s, default 10), FACTOR (100),
// DURATION (30s), P95_MS and P99_MS for the quiet tenants (50, 200).
import { quiet, noisy, enqueue, num, duration } from "./lib/tenants.js";

const rate = num("RATE", 10);
const factor = num("FACTOR", 100);
const length = duration("DURATION", "30s", "5s");

export const options = {
  discardResponseBodies: true,
  scenarios: {
    quiet: {
      executor: "constant-arrival-rate",
      exec: "quietTenant",
      rate: rate * quiet.length,
      timeUnit: "1s",
      duration: length,
      preAllocatedVUs: 20,
      maxVUs: 200,
    },
    noisy: {
      executor: "constant-arrival-rate",
      exec: "noisyTenant",
      rate: rate * factor,
      timeUnit: "1s",
      duration: length,
      preAllocatedVUs: 50,
      maxVUs: 400,
    },
  },
  thresholds: {
    "accepted{class:quiet}": ["rate>0.99"],
    "http_req_duration{class:quiet}": [`p(95)<${num("P95_MS", 50)}`, `p(99)<${num("P99_MS", 200)}`],
    // The noisy tenant gets 202 or 429, nothing else, and mostly 429.
    "unexpected{class:noisy}": ["rate<0.001"],
    "accepted{class:noisy}": ["rate<0.5"],
    "unexpected{class:quiet}": ["rate<0.001"],
  },
  summaryTrendStats: ["avg", "p(50)", "p(95)", "p(99)", "max"],
};

export function quietTenant() {
  const t = quiet[__ITER % quiet.length];
  enqueue(t, __ITER, { class: "quiet", tenant: t.id });
}

export function noisyTenant() {
  enqueue(noisy[0], __ITER, { class: "noisy", tenant: noisy[0].id }, [202, 429]);
}
