package gateway_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fairq/fairq/envelope"
	"github.com/fairq/fairq/queue/queuetest"
)

// deadLetters puts one dead letter per tenant named on the fixture's
// dead-letter queue, as the worker leaves them, and returns their ids.
func (f *fixture) deadLetters(t *testing.T, tenants ...string) []string {
	t.Helper()
	var ids []string
	for i, who := range tenants {
		id := fmt.Sprintf("0190b3c4-7a1e-7c3d-9f00-%012d", i)
		meta := envelope.Meta{EnqueuedAt: f.clock.Now().Add(-time.Hour).UnixMilli(), ID: id, Attempts: 10, LastError: "status 500", Origin: "t-live-01"}
		queuetest.Put(t, f.mem, f.names.DLQ, queuetest.Msg{Body: "job of " + who, Tenant: who, Meta: &meta})
		ids = append(ids, id)
	}
	return ids
}

func TestAdminDeadLettersUnconfigured(t *testing.T) {
	t.Parallel()
	f := setup(t, withAdmin, withoutDeadLetters)
	for _, route := range []struct{ method, path string }{
		{"POST", "/admin/v1/dlq/redrive"}, {"GET", "/admin/v1/dlq"}, {"DELETE", "/admin/v1/dlq"},
	} {
		code, body := f.admin(t, route.method, route.path, "")
		if code != http.StatusServiceUnavailable || !strings.Contains(body, "not configured") || !strings.Contains(body, `"code":"unavailable"`) {
			t.Errorf("%s %s without the dead-letter tools: %d %s", route.method, route.path, code, body)
		}
	}
}

func TestAdminRedrive(t *testing.T) {
	t.Parallel()
	f := setup(t, withAdmin)
	ids := f.deadLetters(t, "acme", "acme", "globex", "acme")
	for _, tt := range []struct {
		body     string
		wantCode int
		want     string
	}{
		{`{"tenant":"a b"}`, 400, `"code":"invalid_request"`},
		{`{"max":-1}`, 400, `"code":"invalid_request"`},
		{`{"max":"2"}`, 400, `"code":"invalid_request"`},
		{`{"maximum":2}`, 400, `"code":"invalid_request"`},
		{`{"ids":["` + strings.Repeat(`x","`, 100) + `x"]}`, 400, `"code":"invalid_request"`},
		{`{"ids":["` + ids[1] + `"]}`, 200, `{"moved":1,"skipped":3,"failed":0,"by_tenant":{"acme":1}}`},
		{`{"tenant":"acme","max":1}`, 200, `{"moved":1,"skipped":0,"failed":0,"by_tenant":{"acme":1}}`},
		{``, 200, `{"moved":2,"skipped":0,"failed":0,"by_tenant":{"acme":1,"globex":1}}`},
		{`{}`, 200, `{"moved":0,"skipped":0,"failed":0,"by_tenant":{}}`},
	} {
		code, body := f.admin(t, "POST", "/admin/v1/dlq/redrive", tt.body)
		if code != tt.wantCode || tt.wantCode == 200 && body != tt.want+"\n" || tt.wantCode != 200 && !strings.Contains(body, tt.want) {
			t.Errorf("redrive %.60s: %d %s, want %d %s", tt.body, code, body, tt.wantCode, tt.want)
		}
	}
	if got := f.depth(t); got != 4 {
		t.Errorf("%d messages on the live queues after the redrives, want 4", got)
	}
}

func TestAdminPeekAndPurge(t *testing.T) {
	t.Parallel()
	f := setup(t, withAdmin)
	ids := f.deadLetters(t, "acme", "acme", "acme", "globex")

	type letter struct {
		ID         string  `json:"id"`
		Tenant     string  `json:"tenant"`
		Error      string  `json:"error"`
		Attempts   int     `json:"attempts"`
		EnqueuedAt string  `json:"enqueued_at"`
		Queue      string  `json:"queue"`
		Body       *string `json:"body"`
	}
	type page struct {
		Messages   []letter `json:"messages"`
		NextCursor *string  `json:"next_cursor"`
	}
	code, body := f.admin(t, "GET", "/admin/v1/dlq?tenant=acme&limit=2", "")
	if code != 200 {
		t.Fatalf("peek: %d %s", code, body)
	}
	first := decodeString[page](t, body)
	if len(first.Messages) != 2 || first.NextCursor == nil || *first.NextCursor != "2" {
		t.Fatalf("first page %s: want 2 letters and cursor 2", body)
	}
	seen := map[string]bool{}
	for _, l := range first.Messages {
		seen[l.ID] = true
		if l.Tenant != "acme" || l.Error != "status 500" || l.Attempts != 10 || l.Queue != "t-live-01" || l.Body != nil || l.EnqueuedAt == "" {
			t.Errorf("peeked %+v: want acme's dead letter without its body", l)
		}
	}
	code, body = f.admin(t, "GET", "/admin/v1/dlq?tenant=acme&limit=2&bodies=true&cursor="+*first.NextCursor, "")
	next := decodeString[page](t, body)
	if code != 200 || len(next.Messages) != 1 || next.NextCursor != nil || next.Messages[0].Body == nil || *next.Messages[0].Body != "job of acme" {
		t.Fatalf("second page: %d %s, want acme's last letter with its body and no cursor", code, body)
	}
	seen[next.Messages[0].ID] = true
	if diff := cmp.Diff(map[string]bool{ids[0]: true, ids[1]: true, ids[2]: true}, seen); diff != "" {
		t.Errorf("pages showed (-want +got):\n%s", diff)
	}

	for _, bad := range []string{"?limit=0", "?limit=101", "?limit=x", "?tenant=a%20b", "?cursor=1", "?cursor=abc", "?bodies=maybe"} {
		if code, body := f.admin(t, "GET", "/admin/v1/dlq"+bad, ""); code != 400 || !strings.Contains(body, `"code":"invalid_request"`) {
			t.Errorf("peek %s: %d %s, want 400 invalid_request", bad, code, body)
		}
	}

	// A peek of acme's letters leaves globex's visible, for the purge.
	code, body = f.admin(t, "DELETE", "/admin/v1/dlq?tenant=globex", "")
	if code != 200 || body != "{\"deleted\":1,\"remaining\":false}\n" {
		t.Errorf("purge of globex: %d %s", code, body)
	}
	if code, body := f.admin(t, "DELETE", "/admin/v1/dlq?max=0", ""); code != 400 {
		t.Errorf("purge max=0: %d %s, want 400", code, body)
	}
	if got := f.depth(t, f.names.DLQ); got != 3 {
		t.Errorf("%d dead letters after purging globex's, want acme's 3", got)
	}
}
