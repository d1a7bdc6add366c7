// k6: bad traffic mixed in with good. Alongside steady good enqueues come
// requests with wrong API keys, bodies over gateway.max_message_size,
// malformed JSON and a wrong Content-Type. Each bad kind gets its own
// stable answer (401 unauthorized, 413 too_large, 400 invalid_request,
// 415 unsupported_media_type), and the good traffic is accepted as if the
// bad were not there.
//
//   go run ./loadtest/k6run -script bad-traffic
//
// Options (-e): RATE of good enqueues (msg/s, default 100), BAD_RATE of
// each bad kind (default 10), DURATION (30s), MAX_MESSAGE_SIZE (the
// gateway's, default 262144), P95_MS and P99_MS for the good traffic (50,
// 200).
import http from "k6/http";
import { check } from "k6";
import { quiet, baseURL, enqueue, message, num, duration } from "./lib/tenants.js";

const length = duration("DURATION", "30s", "5s");
const badRate = num("BAD_RATE", 10);
// A body a little over the limit, as SQS counts size.
const oversized = JSON.stringify({ body: "x".repeat(num("MAX_MESSAGE_SIZE", 262144) + 1024) });

function bad(exec, rate) {
  return { executor: "constant-arrival-rate", exec, rate, timeUnit: "1s", duration: length, preAllocatedVUs: 5, maxVUs: 50 };
}

export const options = {
  discardResponseBodies: false,
  scenarios: {
    good: {
      executor: "constant-arrival-rate",
      exec: "good",
      rate: num("RATE", 100),
      timeUnit: "1s",
      duration: length,
      preAllocatedVUs: 20,
      maxVUs: 200,
    },
    wrong_key: bad("wrongKey", badRate),
    oversized: bad("oversizedBody", badRate),
    malformed: bad("malformedJSON", badRate),
    wrong_type: bad("wrongContentType", badRate),
  },
  thresholds: {
    "accepted{scenario:good}": ["rate>0.99"],
    "http_req_duration{scenario:good}": [`p(95)<${num("P95_MS", 50)}`, `p(99)<${num("P99_MS", 200)}`],
    "checks{scenario:wrong_key}": ["rate>0.999"],
    "checks{scenario:oversized}": ["rate>0.999"],
    "checks{scenario:malformed}": ["rate>0.999"],
    "checks{scenario:wrong_type}": ["rate>0.999"],
  },
  summaryTrendStats: ["avg", "p(50)", "p(95)", "p(99)", "max"],
};

// answers checks a refusal: its status and its problem code.
function answers(res, status, code) {
  let body = {};
  try {
    body = res.json();
  } catch (e) {
    // not JSON: the check below fails
  }
  return check(res, {
    [`${status} ${code}`]: (r) => r.status === status && body.code === code,
  });
}

export function good() {
  const t = quiet[__ITER % quiet.length];
  enqueue(t, __ITER, { tenant: t.id });
}

export function wrongKey() {
  const res = http.post(`${baseURL}/v1/messages`, message(quiet[0], __ITER), {
    headers: { Authorization: `Bearer fq_not_a_key_${__ITER}`, "Content-Type": "application/json" },
  });
  answers(res, 401, "unauthorized");
}

export function oversizedBody() {
  const t = quiet[__ITER % quiet.length];
  const res = http.post(`${baseURL}/v1/messages`, oversized, {
    headers: { Authorization: `Bearer ${t.key}`, "Content-Type": "application/json" },
  });
  answers(res, 413, "too_large");
}

export function malformedJSON() {
  const t = quiet[__ITER % quiet.length];
  const res = http.post(`${baseURL}/v1/messages`, '{"body": {"unterminated": ', {
    headers: { Authorization: `Bearer ${t.key}`, "Content-Type": "application/json" },
  });
  answers(res, 400, "invalid_request");
}

export function wrongContentType() {
  const t = quiet[__ITER % quiet.length];
  const res = http.post(`${baseURL}/v1/messages`, message(t, __ITER), {
    headers: { Authorization: `Bearer ${t.key}`, "Content-Type": "text/plain" },
  });
  answers(res, 415, "unsupported_media_type");
}
