// Package console is fairq's live operator console: the web page an
// on-call engineer opens at /console/ on any gateway to see the queues,
// the tenants, their shards, the workers and the dead letters, and to act
// on them (pause, resume, purge, edit limits, redrive) without a terminal.
//
// The page is one HTML template, one script and one style sheet, embedded
// in the binary (assets/): no framework, no build step, nothing fetched
// from elsewhere. The script polls the admin API (GET /admin/v1/overview)
// about once a second and acts through the same API the command line uses,
// so the console can do nothing an admin token cannot.
//
// A Console holds the login and the sessions. Logging in with the admin
// token sets a stateless session cookie (expiry and nonce, signed with
// HMAC-SHA256 under a key derived from the token's sha256), so that every
// gateway of a fleet accepts a session any of them issued, and rotating
// the token ends every session. The gateway mounts Handler at /console/
// when its admin API is on, and lets Authorize admit a request to
// /admin/v1 that carries a session instead of the bearer token: only with
// the header X-Fairq-Console: 1 and, when the browser sends an Origin, its
// own origin, which no cross-site form or script can arrange.
//
// docs/architecture.md places the console among the other parts; the
// README's "Operating fairq" says how to open it.
package console
