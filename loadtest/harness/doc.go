// Package harness runs fairq's fairness experiment, its load scenarios
// and its chaos suite against the real fairq binary, as users run it, and
// accounts for every message.
//
// A run (Run) takes a Scenario and a Mode:
//
//  1. It writes a fairq configuration (fairq.yaml) with fresh API keys
//     and admin token, and starts fairq in child processes: on the memory
//     backend one `fairq dev --push-url`, on sqs `fairq queues create`,
//     one `fairq gateway` and Scenario.Workers `fairq worker` processes
//     sharing Redis (Services).
//  2. A sink, an HTTP server in the harness, is the application behind the
//     workers: it records every push (tenant, X-Fairq-Enqueued-At, message
//     id, receive count, arrival time) and answers after the tenant's
//     processing time (Tenant.Work): 200, or 500 for a poison message.
//  3. A generator offers each tenant's load at a constant rate, open loop,
//     as POST /v1/messages, and records every answer.
//  4. For an outage, the workers get SIGTERM Outage.At into the load and
//     are started again Outage.For later, while the gateway keeps
//     accepting.
//  5. After Scenario.Duration the load stops; the harness waits (at most
//     Scenario.Drain) until GET /admin/v1/queues shows every queue but the
//     dead-letter queue empty and the sink idle; then it counts the
//     dead-letter queue and redrives it (POST /admin/v1/dlq/redrive) with
//     the sink answering 200 to everything, so that each dead letter comes
//     back once more and is named. Then it stops fairq.
//
// # Modes
//
// ModeSingle is one shared queue, fairness off; ModeShuffle shuffle
// sharding only (the default pool of 8 queues, shards of 2); ModeFull
// adds the per-tenant worker limits (process_rate, process_burst,
// concurrency: Scenario.Limits, the same for every tenant) and the backlog
// queue for messages older than Scenario.BacklogAge. The front door is the
// same in every mode: ingest unlimited in rate, and the per-tenant
// backpressure of Scenario.SoftBacklog and MaxBacklog, which bounds how
// much one tenant can queue in front of the others and how long the
// queues take to drain.
//
// # Fleet
//
// ModeFleet runs full fairq as a fleet of separate processes on the sqs
// backend: FleetGateways (2) `fairq gateway` and FleetWorkers (4) `fairq
// worker` processes sharing the fauxqs emulator and one Redis, either the
// redis-server of StartLocalServices (Services.RedisAddr, redis.mode
// single) or a 3-master Redis Cluster that StartLocalCluster starts with
// redis-server --cluster-enabled and joins with redis-cli --cluster create
// (Services.RedisCluster, redis.mode cluster). The generator sends each
// request to the next gateway in turn. Every per-tenant limit is then
// shared by processes that only Redis connects, and each run records what
// the application saw of them (Result.LimitsSeen): the sink counts each
// tenant's pushes in progress, whichever worker sent them, and keeps the
// most at once; and the start rate of a tenant in the seconds its
// process_rate held it back (RateBound). FleetChecks holds a fleet run to
// four criteria: no tenant above its concurrency at the application, a
// rate-bound tenant within RateTolerance (10%) of its process_rate (its
// process_burst allowed on top, as the limit allows), the
// quiet tenants' p95 within NoisyFullBound (1.2×) of their baseline (for a
// noisy neighbour, the quiet tenants alone on the same fleet, run before
// the run and, in FleetResult.BaselineAfter, again after it, the mean of
// the two; for an outage, before it), and every accepted message
// delivered at least once.
// WriteFleetReport writes them, met or not met, into fleet.md:
//
//	go run ./loadtest/fairness -scenario noisy,outage -modes fleet -redis single,cluster
//
// The harness times a fleet run, but neither sends its load nor answers
// its pushes in its own process (Options.Clients, Options.App): the
// clients process (command loadtest/clients, OfferLoad) offers the load
// under SCHED_IDLE, so that, on a machine the fleet shares with its load,
// sending 500 requests a second takes only the cores fairq's processes
// leave idle, as clients on machines of their own would not compete at
// all (Result.Late shows whether the sends still left on time); and the workers push to an application process (command
// loadtest/app, ServeApp), the sink in a process of its own, which tells
// the harness of each push as a line of JSON, so that a push is not
// answered late by a process busy sending the load. Latency is measured
// from the gateway's acceptance to the push's arrival: neither process is
// in it, but each shared the cores with it.
//
// On one machine the noisy tenant's load is paid for in CPU by every
// process a quiet message passes through, which Result.CPUUse tells by
// role. FleetResult.Control is a contention control that tells how much
// of the quiet tenants' slowdown that alone causes: the baseline once
// more, with a burn process (command loadtest/burn, Burn; Options.Burn)
// burning ControlCores, the CPU the run's processes used beyond the
// baselines' (the clients' apart), in bursts of at most a quarter of a
// millisecond at normal priority, sharing nothing with fairq but the
// cores. It is not judged; the report sets its p95 beside the run's.
//
// A fleet's outage stops its four workers at once: each lets its receives
// under way finish, up to a long poll's 20 s, so stopping takes about that.
//
// # Accounting
//
// Message ids change when a message moves between queues, so the
// generator numbers each message and sends the number as attribute lt-seq,
// which comes back to the sink as X-Aws-Sqsd-Attr-lt-seq. Every accepted
// message (202) is then processed (a delivery answered 2xx), dead-lettered
// (named by the redrive), or lost; Accounting.Balanced demands none lost,
// every poison message dead-lettered and no other. Successful deliveries
// beyond a message's first are counted as duplicates.
//
// # Measures
//
// Latency is enqueue-to-start: from the gateway's acceptance
// (X-Fairq-Enqueued-At, to the millisecond) to the start of the message's
// first delivery. Statistics leave out messages sent during
// Scenario.Warmup. A quiet tenant's reference is the same mode run with the
// quiet tenants only (Scenario.Baseline), or, for an outage, the messages
// sent before it. After an outage, new messages are served at baseline
// latency when the p95 of those sent from FreshAfter after the restart to
// the end of the load is within RecoveryFactor times the p95 before the
// outage; Recovery.RecoveredAfter is where the first RecoveryWindow of
// send time after the restart with such a p95 begins.
// Goodput is the rate of messages whose first success ended in the
// measured window; Jain's index over the quiet tenants' goodput is
// (Σx)²/(n·Σx²). Each send records how late it left (Send.Late), and each
// run the machine's load average and the hypervisor's share of its CPU
// over the windows its latency is judged in (Steal), so that a run
// disturbed by other work on the machine, or on its host, shows as such.
// Each run also reads the CPU time its processes used over the load, by
// role, and the machine's busy share (CPUUse): on one machine, the
// processes share its cores with each other and with the load's clients.
//
// The latency criteria (the quiet tenants' p95 against their baseline, or
// after an outage against before it) leave out the messages sent in a
// second in which the hypervisor took StealLeaveOut (5%) of the CPU or
// more, in the run and in its reference alike (Judged): such seconds
// measure the host rather than fairq. Each criterion tells how many it
// left out and its ratio with them; where more than LeftOutMost (a
// quarter) of a window's messages would be left out, it is not judged,
// and the run is to be made again. The tables and charts keep every
// message. The CPU samples are written beside the run (cpu.csv), so that
// a run read back is judged alike.
//
// Each run writes fairq.yaml, the processes' logs, messages.csv (one line
// per accepted message), queues.csv, cpu.csv and result.json into its
// directory; LoadResult reads them back, and WriteReport draws the charts
// (one PNG per scenario: a panel per mode with every tenant's p95 by time
// of sending) and writes the markdown report with the Done-when Criteria.
//
// # Chaos
//
// RunChaos runs one Fault instead of a scenario: it starts redis-server
// and the fauxqs emulator afresh (StartLocalServices), the sink, a gateway
// and Fault.Workers workers, and offers a constant load as a careful
// client: each message carries an Idempotency-Key of its own and is sent
// again with it after a 503, 429 or transport error, after Retry-After or
// a short backoff, for up to Fault.RetryFor; a 200 replay counts as
// accepted. Fault.At into the load the fault begins and Fault.For later it
// is undone: a worker killed (SIGKILL) or stopped (SIGTERM) and started
// again, Redis or the emulator taken away through a TCP proxy that cuts
// and refuses connections while the service keeps its data, the emulator
// stalled (SIGSTOP, then SIGCONT), the sink failing or hanging, the
// gateway killed and started again, or the slow-body attack (Attackers
// connections that each announce a batch of AttackLength bytes and send
// one). restart-send instead stops and starts the only worker Repeat
// times, sending one message SendAfter after each start. Then, as a run
// does, it waits for the queues to drain and redrives the dead letters.
//
// ChaosResult accounts for every message by its lt-seq: accepted (202 or
// replayed), delivered (answered 2xx by the sink at least once), lost,
// duplicates (2xx deliveries beyond the first) and those among messages
// whose first send was answered 503 or cut in transport, every answer by
// status with the 503s' latency, the messages that reached the sink under
// more than one X-Aws-Sqsd-Msgid or X-Aws-Sqsd-First-Received-At, and
// the peak VmRSS and VmHWM of each process, read from /proc every 200 ms.
// Each fault's Expectations are checked into ChaosResult.Checks; the
// short test asserts that nothing accepted is lost, and the rest where
// Expectations.Enforced. WriteChaosReport writes the report.
//
// # Send cost
//
// RunSendCost measures what single messages cost on SQS under a
// gateway.send_window: one `fairq dev` on the fauxqs emulator, reached
// through a proxy that holds every call for SendCostOptions.Delay (10 ms
// brings the emulator's millisecond near a call to SQS in a region), takes
// single messages at a steady rate from the generator; once the worker
// has processed every accepted one, fairq_sqs_requests_total gives the
// requests of the gateway and the worker per message, and the generator
// the 202's latency. SummariseSendCost takes the median of each window's
// runs, interleaved in rounds so that the machine's other work falls on
// every window alike.
//
// # Choices and caveats
//
//   - The chaos suite's fairq is built without the race detector, even
//     in tests: under it a process takes several times the memory users
//     see, and the slow-body attack would take gigabytes. The slow-body
//     attack lets go at once if the gateway's memory passes
//     Fault.AbortRSS, and says so.
//   - fauxqs keeps nothing across a real restart, so the SQS outage
//     cuts the connections to it instead of restarting it.
//   - The outage needs the sqs backend: on memory the queues live inside
//     the one `fairq dev` process, so its workers cannot stop alone
//     (ErrNeedsSQS).
//   - A worker stopped while its long polls are open on the fauxqs
//     emulator can leave a message that arrives later invisible until its
//     visibility timeout: the emulator hands it to the closed poll. It is
//     delivered late, not lost; the short outage uses a short visibility
//     timeout so that this does not hold up the smoke test.
//   - Capacity is worker.connections over the sink's processing time
//     (Little's law), less the slots that idle receive loops hold while
//     they wait: a worker reserves a slot per queue it watches, so keep
//     connections well above the number of queues (here 50, aws-sqsd's
//     default, with 8 live queues plus overflow and backlog).
package harness
