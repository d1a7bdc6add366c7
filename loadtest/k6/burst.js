// k6: a burst, then quiet. Every quiet tenant bursts at several times its
// ingest_rate for a few seconds, then sends gently. During the burst the
// gateway accepts what the limits allow and refuses the rest with 429;
// afterwards every enqueue is accepted again, at the usual latency: a
// burst leaves nothing behind.
//
//   go run ./loadtest/k6run -script burst
//
// Options (-e): BURST_RATE and QUIET_RATE per tenant (msg/s, default 300
// and 10), BURST (5s), QUIET (20s), P95_MS and P99_MS after the burst
// (50, 200).
import { quiet, enqueue, num, duration } from "./lib/tenants.js";

const burst = duration("BURST", "5s", "2s");

export const options = {
  discardResponseBodies: true,
  scenarios: {
    burst: {
      executor: "constant-arrival-rate",
      exec: "burstLoad",
      rate: num("BURST_RATE", 300) * quiet.length,
      timeUnit: "1s",
      duration: burst,
      preAllocatedVUs: 100,
      maxVUs: 600,
    },
    quiet: {
      executor: "constant-arrival-rate",
      exec: "quietLoad",
      // Starts a second after the burst ends: the burst's last requests
      // are answered by then.
      startTime: `${parseInt(burst) + 1}s`,
      rate: num("QUIET_RATE", 10) * quiet.length,
      timeUnit: "1s",
      duration: duration("QUIET", "20s", "4s"),
      preAllocatedVUs: 20,
      maxVUs: 100,
    },
  },
  thresholds: {
    "unexpected{scenario:burst}": ["rate<0.001"],
    // The limits let some of the burst in.
    "accepted{scenario:burst}": ["rate>0.05"],
    "accepted{scenario:quiet}": ["rate>0.99"],
    "unexpected{scenario:quiet}": ["rate<0.001"],
    "http_req_duration{scenario:quiet}": [`p(95)<${num("P95_MS", 50)}`, `p(99)<${num("P99_MS", 200)}`],
  },
  summaryTrendStats: ["avg", "p(50)", "p(95)", "p(99)", "max"],
};

export function burstLoad() {
  const t = quiet[__ITER % quiet.length];
  enqueue(t, __ITER, { tenant: t.id }, [202, 429]);
}

export function quietLoad() {
  const t = quiet[__ITER % quiet.length];
  enqueue(t, __ITER, { tenant: t.id });
}
