// A worker application written only to the documented Elastic Beanstalk
// worker-environment contract (aws-sqsd): it knows nothing of fairq. It
// takes jobs as HTTP POSTs to / with the message as the body and the
// X-Aws-Sqsd-* headers, and periodic tasks as POSTs to their cron.yaml
// path with X-Aws-Sqsd-Taskname and X-Aws-Sqsd-Scheduled-At; it answers
// 200 when the job is done and 500 when it failed, so that the daemon
// retries it.
//
// For fairq's tests it prints one JSON line per request on stdout (what
// it saw and whether the request met the contract), after a first line
// "listening on <port>". PORT=0 picks a free port. It exits when its
// standard input closes, so that it dies with the process that started it.
//
//   node testapp/app.mjs
import http from 'node:http';

const iso8601 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;

function check(req, body) {
  const h = req.headers; // node lower-cases header names
  const problems = [];
  if (!/^aws-sqsd\//.test(h['user-agent'] || '')) problems.push('user-agent is not aws-sqsd');
  if (req.url.startsWith('/scheduled')) {
    if (!h['x-aws-sqsd-taskname']) problems.push('no task name');
    if (!iso8601.test(h['x-aws-sqsd-scheduled-at'] || '')) problems.push('scheduled-at is not ISO 8601 UTC');
    return problems;
  }
  if (!h['x-aws-sqsd-msgid']) problems.push('no message id');
  if (!h['x-aws-sqsd-queue']) problems.push('no queue');
  if (!iso8601.test(h['x-aws-sqsd-first-received-at'] || '')) problems.push('first-received-at is not ISO 8601 UTC');
  if (!/^[1-9]\d*$/.test(h['x-aws-sqsd-receive-count'] || '')) problems.push('receive count is not a positive integer');
  if (h['content-type'] !== 'application/json') problems.push('content type is not the configured mime type');
  try { JSON.parse(body); } catch { problems.push('body is not JSON'); }
  return problems;
}

const server = http.createServer((req, res) => {
  let body = '';
  req.setEncoding('utf8');
  req.on('data', (chunk) => { body += chunk; });
  req.on('end', () => {
    const problems = req.method === 'POST' ? check(req, body) : ['not a POST'];
    const attrs = {};
    for (const [k, v] of Object.entries(req.headers)) {
      if (k.startsWith('x-aws-sqsd-attr-')) attrs[k.slice('x-aws-sqsd-attr-'.length)] = v;
    }
    const count = Number(req.headers['x-aws-sqsd-receive-count'] || 0);
    let status = 200;
    // A job may ask to fail until its nth delivery: the application reads
    // the receive count the daemon sends, as real ones do to give up.
    try {
      const job = JSON.parse(body || '{}');
      if (job.fail_until && count < job.fail_until) status = 500;
    } catch { /* reported in problems */ }
    if (problems.length > 0) status = 400;
    process.stdout.write(JSON.stringify({
      path: req.url,
      msgid: req.headers['x-aws-sqsd-msgid'] || '',
      queue: req.headers['x-aws-sqsd-queue'] || '',
      receive_count: count,
      first_received_at: req.headers['x-aws-sqsd-first-received-at'] || '',
      task: req.headers['x-aws-sqsd-taskname'] || '',
      scheduled_at: req.headers['x-aws-sqsd-scheduled-at'] || '',
      attrs,
      body,
      status,
      problems,
    }) + '\n');
    res.writeHead(status, { 'Content-Type': 'text/plain' });
    res.end(status === 200 ? 'ok' : 'failed');
  });
});

server.listen(Number(process.env.PORT ?? 8080), '127.0.0.1', () => {
  process.stdout.write(`listening on ${server.address().port}\n`);
});
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
