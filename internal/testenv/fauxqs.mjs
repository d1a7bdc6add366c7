// Starts the fauxqs SQS emulator for fairq's tests on a free loopback port,
// with its logger off, and prints the address it listens on as the first line
// of stdout. It exits when stdin closes (the test binary that started it has
// gone, however it died) or on SIGTERM/SIGINT.
//
// Run it with the module root as the working directory, so that "fauxqs" is
// resolved from the repository's node_modules (installed by `npm ci`).
import { buildApp } from "fauxqs";

// fauxqs 1.9.2 checks message bodies with a regular expression without the
// u flag, so it rejects every character above U+FFFF (emoji, for one), which
// Amazon SQS accepts (#x10000 to #x10FFFF). Its module instance is shared
// with the emulator, so the check is replaced there by SQS's own rule.
const sqsTypes = await import(new URL("./sqs/sqsTypes.js", import.meta.resolve("fauxqs")));
const invalidChar = /[^\t\n\r\x20-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/u;
sqsTypes.INVALID_MESSAGE_BODY_CHAR.test = (s) => invalidChar.test(s);

// fauxqs 1.9.2 wakes every long poll waiting on a queue as soon as one
// message there becomes visible, and each that then finds none (another
// took it) answers empty at once. Amazon SQS answers a long poll empty only
// when its wait ends: that is what long polling is for. With a few workers
// polling each queue, the emulator's way turned every message into a
// receive per waiting poll, most of them empty. Here the waiting polls are
// woken one at a time, the next only once the one before has taken its
// messages (its receive takes them in the first microtask after the wake;
// the next wake comes two later) and some are still visible; the rest wait
// on, as on SQS.
const { SqsQueue } = await import(new URL("./sqs/sqsStore.js", import.meta.resolve("fauxqs")));
const visible = (q) => (q.isFifo() ? q.hasAvailableFifoMessages() : q.messages.length > 0);
function wakeOne(q) {
  if (q.pollWaiters.length === 0 || !visible(q)) {
    q.waking = false;
    return;
  }
  const waiter = q.pollWaiters.shift();
  clearTimeout(waiter.timer);
  waiter.resolve();
  queueMicrotask(() => queueMicrotask(() => wakeOne(q)));
}
SqsQueue.prototype.notifyWaiters = function notifyWaiters() {
  if (this.waking) return;
  this.waking = true;
  wakeOne(this);
};

const app = buildApp({ logger: false });
const addr = await app.listen({ port: 0, host: "127.0.0.1" });
process.stdout.write(addr + "\n");

let closing = false;
async function shutdown() {
  if (closing) return;
  closing = true;
  try {
    await app.close();
  } finally {
    process.exit(0);
  }
}

process.stdin.on("end", shutdown);
process.stdin.on("close", shutdown);
process.stdin.on("error", shutdown);
process.stdin.resume();
process.on("SIGTERM", shutdown);
process.on("SIGINT", shutdown);
