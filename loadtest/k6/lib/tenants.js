// Tenants and their API keys for the k6 scripts, from the keys file that
// `go run ./loadtest/k6run` writes next to the fairq configuration it
// generates:
//
//   {"base_url": "http://127.0.0.1:18080",
//    "tenants": [{"id": "t01", "key": "fq_…", "role": "quiet"}, …]}
//
// Pass it as -e KEYS_FILE=/abs/path/keys.json; -e BASE_URL overrides its
// base_url.
import http from "k6/http";
import { Rate } from "k6/metrics";

const file = __ENV.KEYS_FILE;
if (!file) {
  throw new Error("set -e KEYS_FILE=<keys.json written by go run ./loadtest/k6run>");
}
const cfg = JSON.parse(open(file));

export const baseURL = __ENV.BASE_URL || cfg.base_url;
export const quiet = cfg.tenants.filter((t) => t.role === "quiet");
export const noisy = cfg.tenants.filter((t) => t.role === "noisy");

// accepted is the share of enqueues answered 202, the scripts' main
// threshold; unexpected the share of answers no well-behaved gateway
// gives (anything but 202 and the refusals the script expects).
export const accepted = new Rate("accepted");
export const unexpected = new Rate("unexpected");

// num reads a numeric option from the environment.
export function num(name, dflt) {
  const v = __ENV[name];
  return v === undefined || v === "" ? dflt : Number(v);
}

// duration reads a duration option ("30s"), scaled down with SHORT=1 for
// the smoke run.
export function duration(name, dflt, short) {
  return __ENV[name] || (__ENV.SHORT === "1" ? short : dflt);
}

// message is a small JSON job of the given tenant.
export function message(tenant, n) {
  return JSON.stringify({ body: { tenant: tenant.id, n: n, note: "k6" }, attributes: { source: "k6" } });
}

// enqueue posts one message for tenant and records the answer; ok lists
// the statuses that are not unexpected.
export function enqueue(tenant, n, tags, ok) {
  const res = http.post(`${baseURL}/v1/messages`, message(tenant, n), {
    headers: { Authorization: `Bearer ${tenant.key}`, "Content-Type": "application/json" },
    tags: tags,
  });
  accepted.add(res.status === 202, tags);
  unexpected.add(!(ok || [202]).includes(res.status), tags);
  return res;
}
