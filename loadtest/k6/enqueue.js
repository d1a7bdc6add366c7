// k6: enqueue at a constant arrival rate and check the answers.
//
//   k6 run -e BASE_URL=http://127.0.0.1:8080 -e KEYS=k1,k2 -e RATE=1000 \
//          -e DURATION=20s loadtest/k6/enqueue.js
//
// BATCH > 0 sends POST /v1/messages/batch with that many messages per
// request instead (RATE is then requests/s).
import http from "k6/http";
import { check } from "k6";

const base = __ENV.BASE_URL || "http://127.0.0.1:8080";
const keys = (__ENV.KEYS || "").split(",").filter((k) => k);
const rate = parseInt(__ENV.RATE || "500");
const batch = parseInt(__ENV.BATCH || "0");

export const options = {
  discardResponseBodies: true,
  scenarios: {
    steady: {
      executor: "constant-arrival-rate",
      rate: rate,
      timeUnit: "1s",
      duration: __ENV.DURATION || "20s",
      preAllocatedVUs: parseInt(__ENV.VUS || "50"),
      maxVUs: parseInt(__ENV.MAX_VUS || "200"),
    },
  },
  thresholds: {
    checks: ["rate>0.99"],
    http_req_duration: [`p(99)<${__ENV.P99_MS || "10"}`],
  },
  summaryTrendStats: ["avg", "p(50)", "p(95)", "p(99)", "max"],
};

const message = { body: { order: 42, note: "load test" }, attributes: { kind: "bench" } };

export default function () {
  const key = keys[Math.floor(Math.random() * keys.length)];
  const params = { headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" } };
  if (batch > 0) {
    const msgs = [];
    for (let i = 0; i < batch; i++) msgs.push(message);
    const res = http.post(`${base}/v1/messages/batch`, JSON.stringify({ messages: msgs }), params);
    check(res, { "batch 200": (r) => r.status === 200 });
    return;
  }
  const res = http.post(`${base}/v1/messages`, JSON.stringify(message), params);
  check(res, { "202": (r) => r.status === 202 });
}
