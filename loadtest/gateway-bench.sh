#!/usr/bin/env bash
# Gateway load benchmark: `fairq dev` (gateway + worker on the memory
# backend) against a bare net/http handler answering 202, on this machine in
# the same run, then fairq's p99 at half its measured throughput.
#
#   loadtest/gateway-bench.sh            # DURATION=15s CONNS=64 ROUNDS=2 by default
#
# Needs wrk (apt-get install wrk). The latency at half load is measured
# with loadtest/rate, an open-loop generator (a fixed schedule, latency
# counted from each request's due time, as wrk2 does) lighter than k6.
# The load average before and after is printed: other work on the machine
# shows in the figures.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-15s}
CONNS=${CONNS:-64}
OUT=${OUT:-loadtest/out/gateway}
mkdir -p "$OUT"
go build -o "$OUT/fairq" ./cmd/fairq
go build -o "$OUT/baseline" ./loadtest/baseline

# Ten tenants with fresh keys, limits high enough that neither admission
# nor the worker's process_rate and concurrency ever hold a message back:
# this measures the cost of the path, not the limits.
keys=()
{
  echo "listen: 127.0.0.1:18080"
  echo "log: {level: warn}"
  echo "defaults: {ingest_rate: 1000000, ingest_burst: 1000000, process_rate: 1000000, process_burst: 1000000, concurrency: 10000, soft_backlog: 100000000, max_backlog: 1000000000}"
  echo "tenants:"
  for i in $(seq -w 1 10); do
    k="fq_bench_${i}_$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
    keys+=("$k")
    echo "  - {id: t$i, api_keys: [\"$(printf %s "$k" | "$OUT/fairq" keys hash)\"]}"
  done
} > "$OUT/fairq.yaml"
KEYS=$(IFS=,; echo "${keys[*]}")
echo "$KEYS" > "$OUT/keys.txt"
export KEYS

echo "load before: $(uptime)"
"$OUT/fairq" dev --config "$OUT/fairq.yaml" 2> "$OUT/dev.log" &
fairq_pid=$!
"$OUT/baseline" -listen 127.0.0.1:18090 &
base_pid=$!
trap 'kill $fairq_pid $base_pid 2>/dev/null; wait 2>/dev/null' EXIT
for port in 18080 18090; do
  for _ in $(seq 50); do curl -fs "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break; curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.1; done
done

rps() { awk '/Requests\/sec/ {print $2}'; }
run_wrk() { wrk -t2 -c"$CONNS" -d"$DURATION" --latency -s loadtest/wrk/enqueue.lua "$1" | tee -a "$OUT/wrk.txt"; }
: > "$OUT/wrk.txt"; : > "$OUT/latency.txt"
declare -a base_r fairq_r
for round in $(seq "${ROUNDS:-2}"); do
  echo "== round $round: baseline" | tee -a "$OUT/wrk.txt"
  base_r+=("$(run_wrk http://127.0.0.1:18090 | rps)")
  echo "== round $round: fairq dev" | tee -a "$OUT/wrk.txt"
  fairq_r+=("$(run_wrk http://127.0.0.1:18080 | rps)")
done
non202=$(grep -c "Non-2xx" "$OUT/wrk.txt" || true)
base_avg=$(printf '%s\n' "${base_r[@]}" | awk '{s+=$1} END {printf "%.0f", s/NR}')
fairq_avg=$(printf '%s\n' "${fairq_r[@]}" | awk '{s+=$1} END {printf "%.0f", s/NR}')
ratio=$(awk -v f="$fairq_avg" -v b="$base_avg" 'BEGIN {printf "%.2f", f/b}')
half=$(( fairq_avg / 2 ))
echo "baseline: ${base_r[*]} req/s (mean $base_avg); fairq dev: ${fairq_r[*]} req/s (mean $fairq_avg); ratio $ratio; wrk runs with non-2xx answers: $non202"

# Latency under an open-loop load (loadtest/rate), at half and a quarter of
# fairq's closed-loop throughput, against both servers: the generator runs
# on the same two cores, so the baseline's figures show what it adds.
go build -o "$OUT/rate" ./loadtest/rate
for load in $half $(( fairq_avg / 4 )); do
  for target in baseline:18090 fairq:18080; do
    echo "== ${target%%:*} at $load req/s for 15s (open loop)" | tee -a "$OUT/latency.txt"
    "$OUT/rate" -url "http://127.0.0.1:${target##*:}" -keys "$KEYS" -rate "$load" -duration 15s | tee -a "$OUT/latency.txt"
  done
done
echo "load after: $(uptime)"
