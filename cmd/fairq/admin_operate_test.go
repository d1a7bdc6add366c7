package main

import (
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// enqueueProblem sends one message with an API key and returns the status
// and the problem's code, if any.
func enqueueProblem(t *testing.T, gw, key string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "POST", gw+"/v1/messages", strings.NewReader(`{"body":"hello"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	var p problemAnswer
	_ = decodeAnswer("enqueue", body, &p)
	return res.StatusCode, p.Code
}

// TestAdminCLIPauseResume pauses a tenant, then its ingest, and resumes it.
func TestAdminCLIPauseResume(t *testing.T) {
	g := startAdminGateway(t, true)

	out := g.mustRun(t, "tenants", "pause", "acme")
	if !regexp.MustCompile(`(?m)^state\s+paused: its messages are accepted`).MatchString(out) {
		t.Errorf("tenants pause acme:\n%s\nwant the paused state", out)
	}
	if st, code := enqueueProblem(t, g.url, g.key); st != http.StatusAccepted {
		t.Errorf("enqueue while paused (ingest open): %d %s, want 202", st, code)
	}

	paused := decodeJSON[apiTenant](t, g.mustRun(t, "tenants", "pause", "acme", "--ingest", "--json"))
	if paused.State != "paused" || !paused.PauseIngest {
		t.Errorf("tenants pause --ingest --json: state %q, pause_ingest %v; want paused and true", paused.State, paused.PauseIngest)
	}
	if st, code := enqueueProblem(t, g.url, g.key); st != http.StatusLocked || code != "tenant_paused" {
		t.Errorf("enqueue while ingest is paused: %d %s, want 423 tenant_paused", st, code)
	}
	if out := g.mustRun(t, "tenants", "list"); !regexp.MustCompile(`(?m)^acme\s+paused\+ingest\s`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^globex\s+active\s`).MatchString(out) {
		t.Errorf("tenants list:\n%s\nwant acme paused with its ingest, globex active", out)
	}

	resumed := decodeJSON[apiTenant](t, g.mustRun(t, "tenants", "resume", "acme", "--json"))
	if resumed.State != "active" || resumed.PauseIngest {
		t.Errorf("tenants resume --json: state %q, pause_ingest %v; want active", resumed.State, resumed.PauseIngest)
	}
	if st, code := enqueueProblem(t, g.url, g.key); st != http.StatusAccepted {
		t.Errorf("enqueue after resume: %d %s, want 202", st, code)
	}

	for _, sub := range []string{"pause", "resume", "purge"} {
		code, _, stderr := g.run(t, "tenants", sub, "nosuch")
		wantFailure(t, code, stderr, exitNotFound, `not_found: `)
	}
}

// TestAdminCLITenantPurge sets a tenant's purge instant.
func TestAdminCLITenantPurge(t *testing.T) {
	g := startAdminGateway(t, true)
	before := time.Now().Add(-time.Second)

	out := g.mustRun(t, "tenants", "purge", "globex")
	if !regexp.MustCompile(`^tenant globex: its messages enqueued before \S+ are deleted unseen\n$`).MatchString(out) {
		t.Errorf("tenants purge globex: %q", out)
	}
	ans := decodeJSON[struct {
		Tenant       string `json:"tenant"`
		PurgedBefore string `json:"purged_before"`
	}](t, g.mustRun(t, "tenants", "purge", "globex", "--json"))
	at, err := time.Parse("2006-01-02T15:04:05.000Z", ans.PurgedBefore)
	if ans.Tenant != "globex" || err != nil || at.Before(before) {
		t.Errorf("tenants purge --json = %+v (%v), want globex purged before now, RFC 3339 UTC with milliseconds", ans, err)
	}
	shown := decodeJSON[apiTenant](t, g.mustRun(t, "tenants", "show", "globex", "--json"))
	if shown.PurgedBefore == nil || *shown.PurgedBefore != ans.PurgedBefore {
		t.Errorf("tenants show globex: purged_before %v, want %s", shown.PurgedBefore, ans.PurgedBefore)
	}
	if out := g.mustRun(t, "tenants", "show", "globex"); !strings.Contains(out, "messages enqueued before "+ans.PurgedBefore+" are deleted unseen") {
		t.Errorf("tenants show globex:\n%s\nwant its purge instant", out)
	}
}

// TestAdminCLISetDropAge sets the one limit that is a duration.
func TestAdminCLISetDropAge(t *testing.T) {
	g := startAdminGateway(t, true)
	out := g.mustRun(t, "tenants", "set", "globex", "drop_age=72h")
	if !regexp.MustCompile(`(?m)^drop_age\s+72h0m0s\s+tenant$`).MatchString(out) {
		t.Errorf("tenants set globex drop_age=72h:\n%s", out)
	}
	got := decodeJSON[apiTenant](t, g.mustRun(t, "tenants", "show", "globex", "--json"))
	if string(got.Overrides["drop_age"]) != `"72h0m0s"` {
		t.Errorf("globex's overrides = %s, want drop_age 72h0m0s", got.Overrides)
	}
}

type peekedJSON struct {
	Messages []struct {
		ID         string  `json:"id"`
		Tenant     string  `json:"tenant"`
		Error      string  `json:"error"`
		Attempts   int     `json:"attempts"`
		EnqueuedAt string  `json:"enqueued_at"`
		AgeSeconds float64 `json:"age_seconds"`
		Queue      string  `json:"queue"`
		Body       *string `json:"body"`
	} `json:"messages"`
	NextCursor *string `json:"next_cursor"`
}

// TestAdminCLIDLQPeek shows dead letters; each peek hides what it showed
// for a minute, so the next shows others.
func TestAdminCLIDLQPeek(t *testing.T) {
	g := startAdminGateway(t, true)
	ids := seedDLQ(t, g.names, "acme", "acme", "acme", "globex", "globex")

	out := g.mustRun(t, "dlq", "peek", "--tenant", "globex")
	if !regexp.MustCompile(`(?m)^ID\s+TENANT\s+ATTEMPTS\s+AGE\s+QUEUE\s+ERROR$`).MatchString(out) {
		t.Errorf("dlq peek: no header in\n%s", out)
	}
	for _, id := range ids[3:] {
		if !regexp.MustCompile(`(?m)^` + id + `\s+globex\s+\d+\s+\S+\s+` + g.names.Live[0] + `\s+status 500$`).MatchString(out) {
			t.Errorf("dlq peek --tenant globex: no row for %s in\n%s", id, out)
		}
	}
	if strings.Contains(out, "acme") {
		t.Errorf("dlq peek --tenant globex shows acme's:\n%s", out)
	}

	page := decodeJSON[peekedJSON](t, g.mustRun(t, "dlq", "peek", "--max", "2", "--json"))
	if len(page.Messages) != 2 || page.NextCursor == nil {
		t.Fatalf("dlq peek --max 2 --json: %d messages, next_cursor %v; want 2 and a cursor", len(page.Messages), page.NextCursor)
	}
	var seen []string
	for _, m := range page.Messages {
		seen = append(seen, m.ID)
		if m.Tenant != "acme" || m.Error != "status 500" || m.Attempts < 10 || m.Queue != g.names.Live[0] || m.EnqueuedAt == "" || m.AgeSeconds < 3000 || m.Body != nil {
			t.Errorf("peeked %+v, want acme's dead letter, 10 attempts or more, an hour old, no body", m)
		}
	}

	out = g.mustRun(t, "dlq", "peek", "--bodies")
	last := slices.DeleteFunc(slices.Clone(ids[:3]), func(id string) bool { return slices.Contains(seen, id) })
	if len(last) != 1 || !regexp.MustCompile(`(?m)^id\s+`+last[0]+`$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^body\s+job of acme$`).MatchString(out) {
		t.Errorf("dlq peek --bodies:\n%s\nwant the one dead letter not shown yet (%v) with its body", out, last)
	}
	if out := g.mustRun(t, "dlq", "peek"); out != "no dead letters to show\n" {
		t.Errorf("dlq peek with every dead letter hidden: %q", out)
	}
}

// TestAdminCLIDLQPeekPages reads more dead letters than one page holds.
func TestAdminCLIDLQPeekPages(t *testing.T) {
	g := startAdminGateway(t, true)
	tenants := make([]string, 25)
	for i := range tenants {
		tenants[i] = "acme"
	}
	ids := seedDLQ(t, g.names, tenants...)
	// With bodies, a page holds 20.
	got := decodeJSON[peekedJSON](t, g.mustRun(t, "dlq", "peek", "--bodies", "--max", "30", "--json"))
	var gotIDs []string
	for _, m := range got.Messages {
		gotIDs = append(gotIDs, m.ID)
		if m.Body == nil || *m.Body != "job of acme" {
			t.Errorf("dead letter %s: body %v, want job of acme", m.ID, m.Body)
		}
	}
	slices.Sort(gotIDs)
	if diff := cmp.Diff(ids, gotIDs); diff != "" {
		t.Errorf("dead letters over two pages (-want +got):\n%s", diff)
	}
	if got.NextCursor != nil {
		t.Errorf("next_cursor = %q after the last, want null", *got.NextCursor)
	}
}

// TestAdminCLIRedriveByID moves the dead letters named, and reports what
// it skipped and moved by tenant.
func TestAdminCLIRedriveByID(t *testing.T) {
	g := startAdminGateway(t, true)
	ids := seedDLQ(t, g.names, "acme", "globex", "acme", "globex")

	res := decodeJSON[redriveResult](t, g.mustRun(t, "dlq", "redrive", "--ids", ids[0]+","+ids[1], "--json"))
	if res.Moved != 2 || res.Failed != 0 || !cmp.Equal(res.ByTenant, map[string]int{"acme": 1, "globex": 1}) {
		t.Errorf("dlq redrive --ids = %+v, want the two named moved, one of each tenant", res)
	}
	if live, dead := liveDepth(t, g.names), depth(t, g.names.DLQ); live != 2 || dead != 2 {
		t.Errorf("after the redrive by id: %d live, %d dead; want 2 and 2", live, dead)
	}

	out := g.mustRun(t, "dlq", "redrive", "--tenant", "acme")
	if !strings.HasPrefix(out, "moved 1, skipped 1, failed 0\n") || !strings.Contains(out, `tenant "acme": 1`) {
		t.Errorf("dlq redrive --tenant acme:\n%s\nwant 1 moved, globex's skipped", out)
	}
}

// TestAdminCLIDLQPurge deletes dead letters in bounded calls.
func TestAdminCLIDLQPurge(t *testing.T) {
	g := startAdminGateway(t, true)
	seedDLQ(t, g.names, "acme", "acme", "acme", "acme", "acme", "acme", "acme", "globex", "globex", "globex", "globex", "globex")

	code, stdout, stderr := g.run(t, "dlq", "purge", "--tenant", "globex", "--batch", "2")
	if code != 0 || stdout != "deleted 5 dead letters of tenant globex\n" {
		t.Fatalf("dlq purge --tenant globex: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	if len(lines) < 3 || lines[0] != "deleted 2 of tenant globex's (~12 dead letters in all)…" ||
		lines[len(lines)-1] != "deleted 5 of tenant globex's (~12 dead letters in all)…" {
		t.Errorf("progress of dlq purge --batch 2:\n%s", stderr)
	}
	if dead := depth(t, g.names.DLQ); dead != 7 {
		t.Errorf("%d dead letters left, want acme's 7", dead)
	}

	got := decodeJSON[purgeAnswer](t, g.mustRun(t, "dlq", "purge", "--max", "3", "--json"))
	if got != (purgeAnswer{Deleted: 3, Remaining: true}) {
		t.Errorf("dlq purge --max 3 --json = %+v, want 3 deleted, some remaining", got)
	}
	if out := g.mustRun(t, "dlq", "purge"); out != "deleted 4 dead letters\n" {
		t.Errorf("dlq purge of the rest: %q", out)
	}
	if dead := depth(t, g.names.DLQ); dead != 0 {
		t.Errorf("%d dead letters left, want none", dead)
	}
}
