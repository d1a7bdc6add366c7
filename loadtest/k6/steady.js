// k6: steady multi-tenant load. Every quiet tenant sends at the same
// constant rate, well inside its limits: nearly every enqueue is accepted,
// quickly.
//
//   go run ./loadtest/k6run -script steady          # starts fairq dev, writes keys.json, runs this
//   k6 run -e KEYS_FILE=$PWD/loadtest/out/k6/keys.json loadtest/k6/steady.js
//
// Options (-e): RATE per tenant (msg/s, default 20), DURATION (30s),
// P95_MS and P99_MS (latency thresholds, 50 and 200).
import { quiet, enqueue, num, duration } from "./lib/tenants.js";

const rate = num("RATE", 20);

export const options = {
  discardResponseBodies: true,
  scenarios: {
    steady: {
      executor: "constant-arrival-rate",
      rate: rate * quiet.length,
      timeUnit: "1s",
      duration: duration("DURATION", "30s", "5s"),
      preAllocatedVUs: 20,
      maxVUs: 200,
    },
  },
  thresholds: {
    accepted: ["rate>0.99"],
    unexpected: ["rate<0.001"],
    http_req_duration: [`p(95)<${num("P95_MS", 50)}`, `p(99)<${num("P99_MS", 200)}`],
  },
  summaryTrendStats: ["avg", "p(50)", "p(95)", "p(99)", "max"],
};

export default function () {
  const i = __ITER;
  const t = quiet[i % quiet.length];
  enqueue(t, i, { tenant: t.id });
}
