package main

import (
	"regexp"
	"testing"
	"time"
)

// TestAdminCLIOverview prints what the console shows.
func TestAdminCLIOverview(t *testing.T) {
	g := startAdminGateway(t, true)
	out := g.mustRun(t, "queues", "stats", "--overview")
	for _, pattern := range []string{`(?m)^at \S+$`, `(?m)^QUEUE\s+ROLE`, `(?m)^` + g.names.DLQ + `\s+dlq\s`,
		`(?m)^TENANT\s+STATE\s+BACKLOG`, `(?m)^acme\s+active\s`, `(?m)^globex\s+active\s`, `(?m)^WORKER\s`, `(?m)^dead letters: \d+$`} {
		if !regexp.MustCompile(pattern).MatchString(out) {
			t.Errorf("queues stats --overview: no line matches %s in\n%s", pattern, out)
		}
	}
	o := decodeJSON[apiOverview](t, g.mustRun(t, "queues", "stats", "--overview", "--json"))
	if _, err := time.Parse(time.RFC3339, o.GeneratedAt); err != nil || len(o.Queues) != 7 || len(o.Tenants) != 2 {
		t.Errorf("queues stats --overview --json: generated_at %q (%v), %d queues, %d tenants; want a time, 7 and 2",
			o.GeneratedAt, err, len(o.Queues), len(o.Tenants))
	}
}
