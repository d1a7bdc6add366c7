package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/fairq/fairq/tenant"
)

// dlqBatchDefault is how many dead letters one call to the gateway moves
// or deletes: the admin API's own bound, which keeps each call well within
// a load balancer's idle timeout. A command loops over such calls.
const dlqBatchDefault = 1000

// dlqPeekPage is the most dead letters one peek call asks for: the API's
// limit, and with bodies (up to 1 MiB each) fewer.
const (
	dlqPeekPage       = 100
	dlqPeekPageBodies = 20
)

// dlqFlags are the flags the dlq commands share.
type dlqFlags struct {
	tenant  string
	max     int
	batch   int
	batched bool // the command takes --batch
}

func (f *dlqFlags) register(fs *flag.FlagSet, maxDefault int, maxHelp string) {
	fs.StringVar(&f.tenant, "tenant", "", "only this tenant's dead letters")
	fs.IntVar(&f.max, "max", maxDefault, maxHelp)
}

func (f *dlqFlags) registerBatch(fs *flag.FlagSet) {
	f.batched = true
	fs.IntVar(&f.batch, "batch", dlqBatchDefault, "dead letters per call to the gateway; each call must end within --timeout")
}

func (f *dlqFlags) check() error {
	switch {
	case f.tenant != "" && !tenant.ValidID(f.tenant):
		return fmt.Errorf("%w: --tenant %q is not a tenant id", errUsage, f.tenant)
	case f.max < 0:
		return fmt.Errorf("%w: --max must not be negative", errUsage)
	case f.batched && f.batch <= 0:
		return fmt.Errorf("%w: --batch must be above 0", errUsage)
	}
	return nil
}

// apiDeadLetter is a dead letter as GET /admin/v1/dlq shows it.
type apiDeadLetter struct {
	ID         string  `json:"id"`
	Tenant     string  `json:"tenant"`
	Error      string  `json:"error"`
	Attempts   int     `json:"attempts"`
	EnqueuedAt string  `json:"enqueued_at"`
	AgeSeconds float64 `json:"age_seconds"`
	Queue      string  `json:"queue"`
	Body       *string `json:"body,omitempty"`
}

// peekAnswer is the answer of GET /admin/v1/dlq, and what dlq peek --json
// prints for all the pages it read.
type peekAnswer struct {
	Messages   []json.RawMessage `json:"messages"`
	NextCursor *string           `json:"next_cursor"`
}

func runDLQPeek(ctx context.Context, e env, args []string) error {
	var f dlqFlags
	var bodies bool
	return adminCommand{
		use: "dlq peek [--tenant ID] [--max N] [--bodies]",
		summary: "Show dead letters without moving them: fairq id, tenant, attempts, age, first queue and last error. " +
			"A peek hides the dead letters it shows for a minute, so that the next peek shows others.",
		example: "fairq dlq peek --tenant acme --max 50\nfairq dlq peek --bodies --max 1 --json | jq -r '.messages[0].body'",
		nargs:   0,
		flags: func(fs *flag.FlagSet) {
			f.register(fs, 20, "show at most this many")
			fs.BoolVar(&bodies, "bodies", false, "show each message's body too")
		},
		run: func(ctx context.Context, s *adminSession, _ []string) error {
			if err := f.check(); err != nil {
				return err
			}
			if f.max == 0 {
				return fmt.Errorf("%w: --max must be above 0", errUsage)
			}
			page := dlqPeekPage
			if bodies {
				page = dlqPeekPageBodies
			}
			var all peekAnswer
			for len(all.Messages) < f.max {
				q := url.Values{"limit": {strconv.Itoa(min(page, f.max-len(all.Messages)))}}
				if f.tenant != "" {
					q.Set("tenant", f.tenant)
				}
				if bodies {
					q.Set("bodies", "true")
				}
				if all.NextCursor != nil {
					q.Set("cursor", *all.NextCursor)
				}
				_, data, err := s.c.call(ctx, "GET", "/dlq", q, nil)
				if err != nil {
					return err
				}
				var ans peekAnswer
				if err := decodeAnswer("GET /admin/v1/dlq", data, &ans); err != nil {
					return err
				}
				all.Messages = append(all.Messages, ans.Messages...)
				all.NextCursor = ans.NextCursor
				if ans.NextCursor == nil || len(ans.Messages) == 0 {
					break
				}
			}
			if all.Messages == nil {
				all.Messages = []json.RawMessage{}
			}
			if s.json {
				b, err := json.Marshal(all)
				if err != nil {
					return err
				}
				return writeRaw(s.stdout, b)
			}
			msgs := make([]apiDeadLetter, len(all.Messages))
			for i, raw := range all.Messages {
				if err := decodeAnswer("GET /admin/v1/dlq", raw, &msgs[i]); err != nil {
					return err
				}
			}
			return writeDeadLetters(s, msgs, bodies, f.tenant)
		},
	}.main(ctx, e, args)
}

func writeDeadLetters(s *adminSession, msgs []apiDeadLetter, bodies bool, tenantID string) error {
	if len(msgs) == 0 {
		if tenantID != "" {
			fmt.Fprintf(s.stdout, "no dead letters of tenant %s to show\n", tenantID)
		} else {
			fmt.Fprintln(s.stdout, "no dead letters to show")
		}
		return nil
	}
	tw := newTable(s.stdout)
	if bodies {
		// Bodies are long and many-lined: one block per message.
		for i, m := range msgs {
			if i > 0 {
				fmt.Fprintln(tw)
			}
			fmt.Fprintf(tw, "id\t%s\ntenant\t%s\nattempts\t%d\nage\t%s (enqueued %s)\nqueue\t%s\nerror\t%s\n",
				printable(m.ID), printable(m.Tenant), m.Attempts, ageText(m.AgeSeconds), printable(m.EnqueuedAt),
				printable(m.Queue), printable(m.Error))
			if m.Body != nil {
				fmt.Fprintf(tw, "body\t%s\n", printable(*m.Body))
			}
		}
		return tw.Flush()
	}
	fmt.Fprintln(tw, "ID\tTENANT\tATTEMPTS\tAGE\tQUEUE\tERROR")
	for _, m := range msgs {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", printable(m.ID), printable(m.Tenant), m.Attempts,
			ageText(m.AgeSeconds), printable(m.Queue), printable(truncate(m.Error, 60)))
	}
	return tw.Flush()
}

// runDLQRedriveCmd is `fairq dlq redrive`: with --config it reads the
// dead-letter queue itself, as before there was an admin API to ask;
// without, it asks a gateway.
func runDLQRedriveCmd(ctx context.Context, e env, args []string) error {
	if hasFlag(args, "config") {
		return runDLQRedrive(ctx, e, args)
	}
	return runAdminRedrive(ctx, e, args)
}

// hasFlag reports whether args set the flag name, in any of the forms the
// flag package reads (-name, --name, with =value or not), before any "--".
func hasFlag(args []string, name string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if !strings.HasPrefix(a, "-") {
			continue // a value or an argument, "config" included
		}
		a = strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		if a == name || strings.HasPrefix(a, name+"=") {
			return true
		}
	}
	return false
}

// redriveResult is the answer of POST /admin/v1/dlq/redrive, and what
// dlq redrive --json prints for all its calls together.
type redriveResult struct {
	Moved    int            `json:"moved"`
	Skipped  int            `json:"skipped"`
	Failed   int            `json:"failed"`
	ByTenant map[string]int `json:"by_tenant"`
}

func runAdminRedrive(ctx context.Context, e env, args []string) error {
	var f dlqFlags
	var ids string
	return adminCommand{
		use: "dlq redrive [--tenant ID] [--max N] [--ids a,b]",
		summary: "Move dead letters back to their tenants' live queues with their attempts reset: all, a tenant's, at most N, or those named by fairq id. " +
			"It loops over calls of --batch dead letters, printing its progress on stderr and the counts on stdout. " +
			"(With --config F it reads the queues itself instead of asking a gateway.)",
		example: "fairq dlq redrive --tenant acme\nfairq dlq redrive --ids 0197a4f2-6c1e-7d3a-9b1e-2f4c5d6e7f80,0197a4f2-7a2b-7c4d-8e5f-6a7b8c9d0e1f",
		nargs:   0,
		flags: func(fs *flag.FlagSet) {
			f.register(fs, 0, "move at most this many (0: all)")
			f.registerBatch(fs)
			fs.StringVar(&ids, "ids", "", "move only these dead letters: fairq ids, comma-separated (from dlq peek)")
		},
		run: func(ctx context.Context, s *adminSession, _ []string) error {
			if err := f.check(); err != nil {
				return err
			}
			if ids != "" {
				if f.max != 0 {
					return fmt.Errorf("%w: --ids names the dead letters to move; --max does not apply", errUsage)
				}
				return s.redriveIDs(ctx, f.tenant, ids)
			}
			return s.redriveAll(ctx, f)
		},
	}.main(ctx, e, args)
}

// redriveIDs moves the dead letters named: one call.
func (s *adminSession) redriveIDs(ctx context.Context, tenantID, list string) error {
	var ids []string
	for id := range strings.SplitSeq(list, ",") {
		if id = strings.TrimSpace(id); id == "" {
			return fmt.Errorf("%w: --ids: an empty id in %q", errUsage, list)
		}
		ids = append(ids, id)
	}
	body := map[string]any{"ids": ids}
	if tenantID != "" {
		body["tenant"] = tenantID
	}
	_, data, err := s.c.call(ctx, "POST", "/dlq/redrive", nil, body)
	if err != nil {
		return err
	}
	var res redriveResult
	if err := decodeAnswer("POST /admin/v1/dlq/redrive", data, &res); err != nil {
		return err
	}
	if s.json {
		err = writeRaw(s.stdout, data)
	} else {
		s.printRedrive(res)
	}
	if err != nil {
		return err
	}
	return redriveFailed(res)
}

// redriveAll moves dead letters in calls of f.batch until the dead-letter
// queue has none left to move (a call moved fewer than it asked for) or
// f.max are moved.
func (s *adminSession) redriveAll(ctx context.Context, f dlqFlags) error {
	estimate, err := s.deadLetters(ctx, f.max)
	if err != nil {
		return err
	}
	total := redriveResult{ByTenant: map[string]int{}}
	for {
		want := f.batch
		if f.max > 0 {
			want = min(want, f.max-total.Moved)
		}
		body := map[string]any{"max": want}
		if f.tenant != "" {
			body["tenant"] = f.tenant
		}
		var res redriveResult
		_, data, err := s.c.call(ctx, "POST", "/dlq/redrive", nil, body)
		if err == nil {
			err = decodeAnswer("POST /admin/v1/dlq/redrive", data, &res)
		}
		if err != nil {
			if total.Moved > 0 || total.Failed > 0 {
				// Say what was done before it stopped.
				if perr := s.writeRedrive(total); perr != nil {
					return perr
				}
			}
			return err
		}
		total.Moved += res.Moved
		total.Failed += res.Failed
		// Each call passes over the other tenants' dead letters again:
		// the most one call skipped is how many there are.
		total.Skipped = max(total.Skipped, res.Skipped)
		for t, n := range res.ByTenant {
			total.ByTenant[t] += n
		}
		s.progress("moved", total.Moved, estimate, f.tenant)
		if res.Moved < want || (f.max > 0 && total.Moved >= f.max) {
			break
		}
	}
	if err := s.writeRedrive(total); err != nil {
		return err
	}
	return redriveFailed(total)
}

// writeRedrive prints the counts of a redrive: as the API's JSON, or a
// line and one more per tenant.
func (s *adminSession) writeRedrive(res redriveResult) error {
	if s.json {
		b, err := json.Marshal(res)
		if err != nil {
			return err
		}
		return writeRaw(s.stdout, b)
	}
	s.printRedrive(res)
	return nil
}

func (s *adminSession) printRedrive(res redriveResult) {
	fmt.Fprintf(s.stdout, "moved %d, skipped %d, failed %d\n", res.Moved, res.Skipped, res.Failed)
	for _, t := range slices.Sorted(maps.Keys(res.ByTenant)) {
		fmt.Fprintf(s.stdout, "  tenant %q: %d\n", t, res.ByTenant[t])
	}
}

// redriveFailed is the error of a redrive that left dead letters it could
// not send back.
func redriveFailed(res redriveResult) error {
	if res.Failed == 0 {
		return nil
	}
	return &exitError{code: exitFailed, msg: fmt.Sprintf("%d dead letters could not be moved back and stay in the dead-letter queue; run the redrive again", res.Failed)}
}

// deadLetters estimates how many dead letters there are, at most max (0:
// no bound), for progress lines: -1 when the gateway does not say. An
// error means the gateway cannot be reached, which the operation itself
// would only find again a --timeout later.
func (s *adminSession) deadLetters(ctx context.Context, maxN int) (int, error) {
	_, data, err := s.c.call(ctx, "GET", "/queues", nil, nil)
	if err != nil {
		var ee *exitError
		if errors.As(err, &ee) && ee.code != exitUnreachable && ctx.Err() == nil {
			return -1, nil // refused: the operation will say why, or succeed
		}
		return 0, err
	}
	var ans struct {
		Queues []apiQueue `json:"queues"`
	}
	if json.Unmarshal(data, &ans) != nil {
		return -1, nil //nolint:nilerr // the count is unknown (-1), which the progress line says; the purge goes on
	}
	for _, q := range ans.Queues {
		if q.Role == "dlq" {
			n := int(q.Visible + q.NotVisible + q.Delayed)
			if maxN > 0 {
				n = min(n, maxN)
			}
			return n, nil
		}
	}
	return -1, nil
}

// progress prints how far a long operation is, on stderr.
func (s *adminSession) progress(verb string, done, estimate int, tenantID string) {
	of := ""
	switch {
	case estimate >= 0 && tenantID != "":
		of = fmt.Sprintf(" of tenant %s's (~%d dead letters in all)", tenantID, max(estimate, done))
	case estimate >= 0:
		of = fmt.Sprintf(" of ~%d", max(estimate, done))
	}
	fmt.Fprintf(s.stderr, "%s %d%s…\n", verb, done, of)
}

// purgeAnswer is the answer of DELETE /admin/v1/dlq, and what dlq purge
// --json prints for all its calls together.
type purgeAnswer struct {
	Deleted   int  `json:"deleted"`
	Remaining bool `json:"remaining"`
}

func runDLQPurge(ctx context.Context, e env, args []string) error {
	var f dlqFlags
	return adminCommand{
		use: "dlq purge [--tenant ID] [--max N]",
		summary: "Delete dead letters for good: all, a tenant's, or at most N. " +
			"It loops over calls of --batch dead letters, printing its progress on stderr and the count on stdout. This cannot be undone.",
		example: "fairq dlq purge --tenant acme\nfairq dlq purge --max 5000",
		nargs:   0,
		flags: func(fs *flag.FlagSet) {
			f.register(fs, 0, "delete at most this many (0: all)")
			f.registerBatch(fs)
		},
		run: func(ctx context.Context, s *adminSession, _ []string) error {
			if err := f.check(); err != nil {
				return err
			}
			estimate, err := s.deadLetters(ctx, f.max)
			if err != nil {
				return err
			}
			var total purgeAnswer
			for {
				want := f.batch
				if f.max > 0 {
					want = min(want, f.max-total.Deleted)
				}
				q := url.Values{"max": {strconv.Itoa(want)}}
				if f.tenant != "" {
					q.Set("tenant", f.tenant)
				}
				_, data, err := s.c.call(ctx, "DELETE", "/dlq", q, nil)
				var ans purgeAnswer
				if err == nil {
					err = decodeAnswer("DELETE /admin/v1/dlq", data, &ans)
				}
				if err != nil {
					if total.Deleted > 0 {
						// What was done is worth printing; the error
						// that stopped the purge is the one to report.
						_ = s.printPurge(total, f.tenant)
					}
					return err
				}
				total.Deleted += ans.Deleted
				total.Remaining = ans.Remaining
				s.progress("deleted", total.Deleted, estimate, f.tenant)
				// A call that deleted nothing while some remain met only
				// dead letters in flight (being peeked or redriven): stop
				// rather than spin.
				if !ans.Remaining || ans.Deleted == 0 || (f.max > 0 && total.Deleted >= f.max) {
					break
				}
			}
			return s.printPurge(total, f.tenant)
		},
	}.main(ctx, e, args)
}

func (s *adminSession) printPurge(total purgeAnswer, tenantID string) error {
	if s.json {
		b, err := json.Marshal(total)
		if err != nil {
			return err
		}
		return writeRaw(s.stdout, b)
	}
	of := ""
	if tenantID != "" {
		of = " of tenant " + tenantID
	}
	fmt.Fprintf(s.stdout, "deleted %d dead letters%s\n", total.Deleted, of)
	if total.Remaining {
		fmt.Fprintln(s.stdout, "some remain: in flight (being peeked or redriven), past --max, or arrived meanwhile")
	}
	return nil
}
