#!/usr/bin/env bash
# SQS cost benchmark: `fairq dev` on the SQS backend against the fauxqs
# emulator at a steady load, reporting SQS requests per accepted message
# from fairq_sqs_requests_total: send-type (SendMessageBatch) and in total
# (send + receive + delete + heartbeats + depth polls).
#
#   loadtest/sqs-bench.sh                 # RATE=1000 msg/s, DURATION=30s
#
# Runs two modes at the same message rate: one message per request
# (POST /v1/messages), and BATCH messages per request
# (POST /v1/messages/batch). Needs node + `npm ci` (fauxqs) and k6.
set -euo pipefail
cd "$(dirname "$0")/.."
RATE=${RATE:-1000}
DURATION=${DURATION:-30s}
BATCH=${BATCH:-20}
OUT=${OUT:-loadtest/out/sqs}
K6=${K6:-$(command -v k6 || echo "$(go env GOPATH)/bin/k6")}
mkdir -p "$OUT"
go build -o "$OUT/fairq" ./cmd/fairq
[ -d node_modules/fauxqs ] || npm ci --no-audit --no-fund --loglevel=error

pids=()
cleanup() { exec 3>&-; for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

# The emulator exits when its stdin closes: this script holds the write end
# of a FIFO as its stdin, so it goes when the script does, however it ends.
rm -f "$OUT/fauxqs.in" "$OUT/fauxqs.addr"; mkfifo "$OUT/fauxqs.in"
node internal/testenv/fauxqs.mjs < "$OUT/fauxqs.in" > "$OUT/fauxqs.addr" &
pids+=($!)
exec 3> "$OUT/fauxqs.in"
for _ in $(seq 100); do [ -s "$OUT/fauxqs.addr" ] && break; sleep 0.1; done
endpoint=$(head -1 "$OUT/fauxqs.addr")
export AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench

run_mode() { # name, k6 extra args...
  local name=$1; shift
  local prefix="bench$(head -c 4 /dev/urandom | od -An -tx1 | tr -d ' \n')"
  local keys=() cfg="$OUT/$name.yaml"
  {
    echo "listen: 127.0.0.1:18081"
    echo "backend: sqs"
    echo "sqs: {endpoint: \"$endpoint\", queue_prefix: $prefix}"
    echo "log: {level: warn}"
    echo "defaults: {ingest_rate: 100000, ingest_burst: 100000, soft_backlog: 10000000, max_backlog: 100000000, process_rate: 100000, process_burst: 100000, concurrency: 1000}"
    echo "tenants:"
    for i in $(seq -w 1 10); do
      k="fq_bench_${i}_$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
      keys+=("$k")
      echo "  - {id: t$i, api_keys: [\"$(printf %s "$k" | "$OUT/fairq" keys hash)\"]}"
    done
  } > "$cfg"
  "$OUT/fairq" queues create --config "$cfg" > /dev/null
  "$OUT/fairq" dev --config "$cfg" 2> "$OUT/$name-dev.log" &
  local dev_pid=$!
  for _ in $(seq 100); do curl -fs http://127.0.0.1:18081/healthz >/dev/null 2>&1 && break; sleep 0.1; done
  "$K6" run --quiet -e BASE_URL=http://127.0.0.1:18081 -e KEYS="$(IFS=,; echo "${keys[*]}")" \
    -e DURATION="$DURATION" -e VUS=50 -e MAX_VUS=300 -e P99_MS=1000 "$@" \
    --summary-export "$OUT/$name-k6.json" loadtest/k6/enqueue.js > "$OUT/$name-k6.txt" 2>&1 || true
  sleep 3 # let the worker finish what was accepted
  curl -s http://127.0.0.1:18081/metrics > "$OUT/$name-metrics.txt"
  kill "$dev_pid"; wait "$dev_pid" 2>/dev/null || true
  awk -v name="$name" '
    /^fairq_sqs_requests_total/ { split($1, a, "op=\""); split(a[2], b, "\""); req[b[1]] += $2; total += $2 }
    /^fairq_admitted_total/ { acc += $2 }
    /^fairq_worker_processed_total/ { done += $2 }
    END {
      if (acc == 0) { print name ": nothing accepted"; exit }
      printf "%s: accepted %d, processed %d; SQS requests per accepted message: send %.3f, receive %.3f, delete %.3f, visibility %.3f, depth %.3f, total %.3f\n",
        name, acc, done, req["SendMessageBatch"]/acc, req["ReceiveMessage"]/acc, req["DeleteMessageBatch"]/acc,
        req["ChangeMessageVisibilityBatch"]/acc, req["GetQueueAttributes"]/acc, total/acc
    }' "$OUT/$name-metrics.txt"
}

run_mode single -e RATE="$RATE"
run_mode batch -e RATE=$((RATE / BATCH)) -e BATCH="$BATCH"
