#!/usr/bin/env bash
# Gateway throughput of two commits side by side: builds `fairq` at each
# (in temporary git worktrees), then runs `fairq dev` of A, of B and the
# bare net/http baseline (loadtest/baseline) in turn under the same wrk load
# (loadtest/wrk/enqueue.lua), round after round (A, B, baseline, then B,
# baseline, A, then baseline, A, B, …), and prints each build's
# requests/s, its ratio to the baseline and B/A, and the server's CPU time
# per request, which the machine's other work disturbs less than the rate.
#
#   loadtest/compare.sh A [B]      # B defaults to HEAD
#   ROUNDS=3 DURATION=10s CONNS=64 loadtest/compare.sh main json
#   B_ENV="OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318" loadtest/compare.sh HEAD HEAD
#
# A_ENV and B_ENV are VAR=value words added to the environment of A's and
# B's server: one build against itself with a setting changed (tracing on
# in B, say).
#
# Only one server runs at a time, on the same port, started afresh for its
# run and stopped after it, so that no build's worker drains its backlog
# while another is measured. Alternating the builds, and the place each
# takes in a round, spreads drifts in the machine's load over all three.
# The load average is printed with each run: on a shared machine the
# figures are noisy (with a load average about 4 on two cores, one build
# measured as both A and B came out 11% apart in requests/s, 6% in CPU per
# request, over 4 rounds of 10 s): compare many rounds, or an A/A run.
# Needs wrk (Debian's wrk; `make loadtest-compare` installs it).
set -euo pipefail

usage() { echo "usage: $0 A [B]   (commits; B defaults to HEAD)" >&2; exit 2; }
if [ $# -lt 1 ] || [ $# -gt 2 ]; then usage; fi
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10s}
CONNS=${CONNS:-64}
THREADS=${THREADS:-2}
PORT=${PORT:-18380}
command -v wrk >/dev/null 2>&1 || { echo "wrk missing: apt-get install wrk, or make loadtest-compare" >&2; exit 1; }

rev_a=$(git rev-parse --verify "$1^{commit}")
rev_b=$(git rev-parse --verify "${2:-HEAD}^{commit}")
tmp=$(mktemp -d)
server_pid=""
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  for w in a b; do
    [ -d "$tmp/src-$w" ] && git worktree remove --force "$tmp/src-$w" >/dev/null 2>&1
  done
  git worktree prune
  rm -rf "$tmp"
}
trap cleanup EXIT

for w in a b; do
  rev=$rev_a; [ "$w" = b ] && rev=$rev_b
  echo "build $w: $(git log -1 --format='%h %s' "$rev")"
  git worktree add --quiet --detach "$tmp/src-$w" "$rev"
  (cd "$tmp/src-$w" && go build -o "$tmp/fairq-$w" ./cmd/fairq)
done
go build -o "$tmp/baseline" ./loadtest/baseline

# Ten tenants with fresh keys, limits high enough that neither admission
# nor the worker's process_rate and concurrency ever hold a message back:
# this measures the cost of the path, not the limits.
keys=()
{
  echo "listen: 127.0.0.1:$PORT"
  echo "log: {level: warn}"
  echo "defaults: {ingest_rate: 1000000, ingest_burst: 1000000, process_rate: 1000000, process_burst: 1000000, concurrency: 10000, soft_backlog: 100000000, max_backlog: 1000000000}"
  echo "tenants:"
  for i in $(seq -w 1 10); do
    k="fq_compare_${i}_$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
    keys+=("$k")
    echo "  - {id: t$i, api_keys: [\"$(printf %s "$k" | "$tmp/fairq-a" keys hash)\"]}"
  done
} > "$tmp/fairq.yaml"
KEYS=$(IFS=,; echo "${keys[*]}")
export KEYS

read -r -a a_env <<< "${A_ENV:-}"
read -r -a b_env <<< "${B_ENV:-}"

# start NAME starts the server NAME (a, b or baseline) and waits until it
# answers.
start() {
  case $1 in
    baseline) "$tmp/baseline" -listen "127.0.0.1:$PORT" 2> "$tmp/$1.log" & ;;
    a) env "${a_env[@]}" "$tmp/fairq-a" dev --config "$tmp/fairq.yaml" 2> "$tmp/$1.log" & ;;
    b) env "${b_env[@]}" "$tmp/fairq-b" dev --config "$tmp/fairq.yaml" 2> "$tmp/$1.log" & ;;
  esac
  server_pid=$!
  for _ in $(seq 100); do
    curl -s -o /dev/null "http://127.0.0.1:$PORT/healthz" && return 0
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "$1 did not start:" >&2; cat "$tmp/$1.log" >&2; exit 1
}

stop() { kill "$server_pid"; wait "$server_pid" 2>/dev/null || true; server_pid=""; }

# cpu_ticks prints the CPU time (user and system, in clock ticks) the
# server has used so far. Requests/s drift with the machine's other work;
# the CPU time each request costs the server drifts much less.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$server_pid/stat" 2>/dev/null || echo 0; }
hz=$(getconf CLK_TCK)

echo "load before: $(uptime)"
echo "wrk -t$THREADS -c$CONNS -d$DURATION, $ROUNDS rounds"
[ -n "${A_ENV:-}" ] && echo "A's environment: $A_ENV"
[ -n "${B_ENV:-}" ] && echo "B's environment: $B_ENV"
printf '%-6s %-9s %12s %12s %9s  %s\n' round build "requests/s" "CPU µs/req" non-2xx "load average (1, 5, 15 min) before the run"
declare -A sum cpusum
servers=(a b baseline)
for round in $(seq "$ROUNDS"); do
  # Each round starts one server later (A B baseline, B baseline A,
  # baseline A B, …): every three rounds, each server has run once in each
  # place, so that what a place costs (the server just stopped, a drift in
  # the machine's load) falls on all three alike.
  r=$(( (round - 1) % 3 ))
  for name in "${servers[@]:r}" "${servers[@]:0:r}"; do
    start "$name"
    # A second of load first, so that every run is measured warm.
    wrk -t"$THREADS" -c"$CONNS" -d1s -s loadtest/wrk/enqueue.lua "http://127.0.0.1:$PORT" >/dev/null
    load=$(cut -d' ' -f1-3 /proc/loadavg)
    ticks=$(cpu_ticks)
    out=$(wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" -s loadtest/wrk/enqueue.lua "http://127.0.0.1:$PORT")
    ticks=$(( $(cpu_ticks) - ticks ))
    stop
    echo "$out" >> "$tmp/wrk-$name.txt"
    rps=$(awk '/^Requests\/sec/ {print $2}' <<<"$out")
    requests=$(awk '/requests in/ {print $1}' <<<"$out")
    non2xx=$(awk '/Non-2xx or 3xx responses/ {print $NF}' <<<"$out")
    if [ -z "$rps" ] || [ -z "$requests" ]; then echo "wrk printed no rate:" >&2; echo "$out" >&2; exit 1; fi
    cpu=$(awk -v t="$ticks" -v hz="$hz" -v n="$requests" 'BEGIN {printf "%.1f", t / hz / n * 1e6}')
    sum[$name]=$(awk -v s="${sum[$name]:-0}" -v r="$rps" 'BEGIN {print s + r}')
    cpusum[$name]=$(awk -v s="${cpusum[$name]:-0}" -v c="$cpu" 'BEGIN {print s + c}')
    printf '%-6s %-9s %12.0f %12s %9s  %s\n' "$round" "$name" "$rps" "$cpu" "${non2xx:-0}" "$load"
  done
done
echo "load after: $(uptime)"

mean() { awk -v s="${sum[$1]}" -v n="$ROUNDS" 'BEGIN {printf "%.0f", s / n}'; }
cpu_mean() { awk -v s="${cpusum[$1]}" -v n="$ROUNDS" 'BEGIN {printf "%.1f", s / n}'; }
base=$(mean baseline)
echo
printf '%-9s %-12s %12s %12s %12s  %s\n' build commit "requests/s" "÷ baseline" "CPU µs/req" ""
for name in a b; do
  rev=$rev_a; [ "$name" = b ] && rev=$rev_b
  m=$(mean "$name")
  printf '%-9s %-12s %12s %12s %12s  %s\n' "$name" "$(git rev-parse --short "$rev")" "$m" \
    "$(awk -v m="$m" -v b="$base" 'BEGIN {printf "%.3f", m / b}')" "$(cpu_mean "$name")" "$(git log -1 --format=%s "$rev")"
done
printf '%-9s %-12s %12s %12s %12s\n' baseline "" "$base" "" "$(cpu_mean baseline)"
echo "B/A: requests/s $(awk -v a="$(mean a)" -v b="$(mean b)" 'BEGIN {printf "%.3f", b / a}'), CPU per request $(awk -v a="$(cpu_mean a)" -v b="$(cpu_mean b)" 'BEGIN {printf "%.3f", b / a}') (means of $ROUNDS runs of $DURATION each)"
