// Package schedule runs the periodic tasks of a worker fleet: the cron_file
// of the worker configuration, in the cron.yaml format of Elastic Beanstalk
// worker environments,
//
//	version: 1
//	cron:
//	  - name: "backup"
//	    url: "/backup"
//	    schedule: "0 */12 * * *"
//
// with schedules in the standard five-field cron syntax or descriptors such
// as @hourly and @every 10m (robfig/cron/v3), in UTC. Each firing is a
// message enqueued on a live queue with the fairq-task attribute
// (envelope.Task); whichever worker receives it pushes it to the task's
// path with X-Aws-Sqsd-Taskname and X-Aws-Sqsd-Scheduled-At, as aws-sqsd
// does.
//
// Exactly one process of the fleet enqueues each firing. With Redis, the
// processes elect a leader by a lease (SET NX PX, renewed by a Lua script
// every LeaseTTL/3 while its holder still owns it); when the leader dies
// its lease runs out and another process takes over within about LeaseTTL.
// A new leader fires the firings it finds missed in the last 2·LeaseTTL,
// and every firing is claimed by a key of its own (task and scheduled
// second, SET NX) before its message is sent, so that a firing is enqueued
// once even when two processes both believe they lead during a handover.
// Without Redis the process is its own leader.
//
// While Redis is unreachable no firing is enqueued: a leader that cannot
// renew its lease steps down when the lease would have expired, and no one
// can claim a firing. Duplicated cron jobs are the worse failure for most
// applications; the firings missed are logged.
package schedule
