package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"
)

// The commands of this file and of admin_tenants.go and admin_dlq.go
// operate a running gateway through its admin API (/admin/v1): they read
// no configuration and touch no queue or Redis themselves. The gateway is
// --url or FAIRQ_ADMIN_URL; the admin token comes from FAIRQ_ADMIN_TOKEN
// or a file (--token-file), never from a flag's value, which would land in
// the shell's history and in every process listing.

// adminCommand is one command of the admin API: its help, its own flags
// and what it does once the command line is understood.
type adminCommand struct {
	use     string // "tenants show ID"
	summary string // one sentence
	example string // one or more command lines, shown by --help
	nargs   int    // positional arguments it takes; -1: one or more
	flags   func(fs *flag.FlagSet)
	run     func(ctx context.Context, s *adminSession, args []string) error
}

// adminSession is what a command's run works with.
type adminSession struct {
	c      *adminClient
	json   bool // print the API's JSON rather than tables
	stdout io.Writer
	stderr io.Writer
}

// main parses the command line and runs the command.
func (cmd adminCommand) main(ctx context.Context, e env, args []string) error {
	words := strings.Fields(cmd.use)
	fs := newFlags(e, words[0]+" "+words[1])
	urlFlag := fs.String("url", cmp.Or(e.getenv("FAIRQ_ADMIN_URL"), adminURLDefault), "the gateway's base URL (FAIRQ_ADMIN_URL)")
	tokenFile := fs.String("token-file", "", "read the admin token from this file (default: FAIRQ_ADMIN_TOKEN)")
	asJSON := fs.Bool("json", false, "print the API's JSON instead of tables")
	timeout := fs.Duration("timeout", adminTimeoutDefault, "give up on a call to the gateway after this long")
	if cmd.flags != nil {
		cmd.flags(fs)
	}
	fs.Usage = func() {
		out := fs.Output()
		fmt.Fprintf(out, "Usage: fairq %s\n\n%s\n\nExample:\n", cmd.use, wrap(cmd.summary, 76))
		for line := range strings.Lines(cmd.example) {
			fmt.Fprintf(out, "  %s", line)
		}
		fmt.Fprint(out, "\n\nFlags:\n")
		fs.PrintDefaults()
		fmt.Fprint(out, "\nExit codes: 0 done; 1 the gateway refused or failed; 2 usage; 3 the gateway cannot be reached; 4 not found.\n")
	}
	pos, err := parseInterspersed(fs, e, args)
	if err != nil {
		return err
	}
	switch {
	case cmd.nargs >= 0 && len(pos) != cmd.nargs, cmd.nargs < 0 && len(pos) == 0:
		return fmt.Errorf("%w: fairq %s (see --help)", errUsage, cmd.use)
	case *timeout <= 0:
		return fmt.Errorf("%w: --timeout must be above 0", errUsage)
	}
	token, err := adminToken(e, *tokenFile)
	if err != nil {
		return err
	}
	c, err := newAdminClient(*urlFlag, token, *timeout)
	if err != nil {
		return err
	}
	defer c.Close()
	return cmd.run(ctx, &adminSession{c: c, json: *asJSON, stdout: e.stdout, stderr: e.stderr}, pos)
}

// parseInterspersed parses flags before, between and after positional
// arguments ("tenants show acme --json"), up to a "--" after which every
// argument is positional. An explicit --help prints to stdout.
func parseInterspersed(fs *flag.FlagSet, e env, args []string) ([]string, error) {
	var rest []string
	if i := slices.Index(args, "--"); i >= 0 {
		args, rest = args[:i], args[i+1:]
	}
	for _, a := range args {
		if a == "-h" || a == "-help" || a == "--help" {
			fs.SetOutput(e.stdout)
		}
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, fmt.Errorf("%w: %v", errUsage, err)
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	return append(pos, rest...), nil
}

// adminToken returns the admin token: the first line of tokenFile when
// given, FAIRQ_ADMIN_TOKEN otherwise.
func adminToken(e env, tokenFile string) (string, error) {
	token, from := e.getenv("FAIRQ_ADMIN_TOKEN"), "FAIRQ_ADMIN_TOKEN"
	if tokenFile != "" {
		b, err := os.ReadFile(tokenFile)
		if err != nil {
			return "", fmt.Errorf("%w: --token-file: %v", errUsage, err)
		}
		line, _, _ := strings.Cut(string(b), "\n")
		token, from = line, "--token-file "+tokenFile
	}
	token = strings.TrimSpace(token)
	if token == "" {
		return "", fmt.Errorf("%w: no admin token: set FAIRQ_ADMIN_TOKEN or pass --token-file", errUsage)
	}
	for i := 0; i < len(token); i++ {
		if token[i] <= ' ' || token[i] > '~' {
			// A header cannot carry it; say so rather than fail to send.
			return "", fmt.Errorf("%w: the admin token in %s holds a space or a character other than printable ASCII", errUsage, from)
		}
	}
	return token, nil
}

// writeRaw prints an answer of the API as it came, one document a line.
func writeRaw(w io.Writer, data []byte) error {
	if len(data) > 0 && data[len(data)-1] != '\n' {
		data = append(data, '\n')
	}
	_, err := w.Write(data)
	return err
}

// newTable returns a tabwriter for a human table; Flush prints it.
func newTable(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0) }

// number prints a rate or a count without trailing zeros.
func number(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// rate prints a rate per second with at most one decimal.
func rate(v float64) string {
	return strconv.FormatFloat(float64(int64(v*10+0.5))/10, 'f', -1, 64)
}

// ageText prints a number of seconds as a duration, to the second.
func ageText(seconds float64) string {
	if seconds < 0 {
		return "-"
	}
	return time.Duration(seconds * float64(time.Second)).Round(time.Second).String()
}

// wrap breaks text into lines of at most width runes, between words.
func wrap(text string, width int) string {
	var b strings.Builder
	n := 0
	for _, w := range strings.Fields(text) {
		l := utf8.RuneCountInString(w)
		switch {
		case n == 0:
		case n+1+l > width:
			b.WriteByte('\n')
			n = 0
		default:
			b.WriteByte(' ')
			n++
		}
		b.WriteString(w)
		n += l
	}
	return b.String()
}

// truncate cuts s to n runes, marking the cut.
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// apiQueue is a queue's depth as GET /admin/v1/queues shows it.
type apiQueue struct {
	Name       string `json:"name"`
	Role       string `json:"role"`
	Visible    int64  `json:"visible"`
	NotVisible int64  `json:"not_visible"`
	Delayed    int64  `json:"delayed"`
}

// apiOverview is GET /admin/v1/overview: what the console shows.
type apiOverview struct {
	GeneratedAt string     `json:"generated_at"`
	Queues      []apiQueue `json:"queues"`
	Tenants     []struct {
		ID               string             `json:"id"`
		State            string             `json:"state"`
		PauseIngest      bool               `json:"pause_ingest"`
		AcceptedPerS     float64            `json:"accepted_per_s"`
		RefusedPerS      map[string]float64 `json:"refused_per_s"`
		SpilledPerS      map[string]float64 `json:"spilled_per_s"`
		Backlog          int64              `json:"backlog"`
		InFlight         int64              `json:"in_flight"`
		Concurrency      int64              `json:"concurrency"`
		ProcessRate      float64            `json:"process_rate"`
		ProcessRateLimit float64            `json:"process_rate_limit"`
		AgeP95Seconds    float64            `json:"age_first_attempt_p95_seconds"`
		Noisy            bool               `json:"noisy"`
		NoisyReason      string             `json:"noisy_reason"`
	} `json:"tenants"`
	Workers []struct {
		ID            string  `json:"id"`
		Slots         int64   `json:"slots"`
		SlotsInUse    int64   `json:"slots_in_use"`
		MessagesPerS  float64 `json:"messages_per_s"`
		LastHeartbeat string  `json:"last_heartbeat"`
	} `json:"workers"`
	DLQ struct {
		Visible int64 `json:"visible"`
	} `json:"dlq"`
}

// runQueuesStats prints the depth of every queue, and with --overview the
// tenants and workers the console shows.
func runQueuesStats(ctx context.Context, e env, args []string) error {
	var overview bool
	return adminCommand{
		use:     "queues stats [--overview]",
		summary: "Print the depth of every queue: visible, in flight (not visible) and delayed messages. With --overview, also each tenant's backlog, in-flight messages, rates and noisiness, and each worker's slots (GET /admin/v1/overview).",
		example: "FAIRQ_ADMIN_URL=https://fairq.internal:8080 fairq queues stats\nfairq queues stats --overview --json | jq '.tenants[] | select(.noisy)'",
		flags: func(fs *flag.FlagSet) {
			fs.BoolVar(&overview, "overview", false, "also the tenants and the workers, as the console shows them")
		},
		run: func(ctx context.Context, s *adminSession, _ []string) error {
			if overview {
				return s.printOverview(ctx)
			}
			_, data, err := s.c.call(ctx, "GET", "/queues", nil, nil)
			if err != nil {
				return err
			}
			if s.json {
				return writeRaw(s.stdout, data)
			}
			var ans struct {
				Queues []apiQueue `json:"queues"`
			}
			if err := decodeAnswer("GET /admin/v1/queues", data, &ans); err != nil {
				return err
			}
			return writeQueues(s.stdout, ans.Queues)
		},
	}.main(ctx, e, args)
}

func writeQueues(w io.Writer, qs []apiQueue) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "QUEUE\tROLE\tVISIBLE\tNOT VISIBLE\tDELAYED")
	var total apiQueue
	for _, q := range qs {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\n", printable(q.Name), q.Role, q.Visible, q.NotVisible, q.Delayed)
		total.Visible += q.Visible
		total.NotVisible += q.NotVisible
		total.Delayed += q.Delayed
	}
	fmt.Fprintf(tw, "total\t\t%d\t%d\t%d\n", total.Visible, total.NotVisible, total.Delayed)
	return tw.Flush()
}

func (s *adminSession) printOverview(ctx context.Context) error {
	_, data, err := s.c.call(ctx, "GET", "/overview", nil, nil)
	if err != nil {
		return err
	}
	if s.json {
		return writeRaw(s.stdout, data)
	}
	var o apiOverview
	if err := decodeAnswer("GET /admin/v1/overview", data, &o); err != nil {
		return err
	}
	fmt.Fprintf(s.stdout, "at %s\n\n", printable(o.GeneratedAt))
	if err := writeQueues(s.stdout, o.Queues); err != nil {
		return err
	}
	tw := newTable(s.stdout)
	fmt.Fprintln(tw, "\nTENANT\tSTATE\tBACKLOG\tIN FLIGHT\tACCEPTED/S\tREFUSED/S\tSPILLED/S\tPROCESSED/S\tAGE P95\tNOISY")
	for _, t := range o.Tenants {
		noisy := "-"
		if t.Noisy {
			noisy = "yes: " + printable(t.NoisyReason)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d/%d\t%s\t%s\t%s\t%s/%s\t%s\t%s\n", t.ID, stateText(t.State, t.PauseIngest),
			t.Backlog, t.InFlight, t.Concurrency, rate(t.AcceptedPerS), rate(sum(t.RefusedPerS)), rate(sum(t.SpilledPerS)),
			rate(t.ProcessRate), number(t.ProcessRateLimit), ageText(t.AgeP95Seconds), noisy)
	}
	fmt.Fprintln(tw, "\nWORKER\tSLOTS IN USE\tMESSAGES/S\tLAST HEARTBEAT")
	for _, w := range o.Workers {
		fmt.Fprintf(tw, "%s\t%d/%d\t%s\t%s\n", printable(w.ID), w.SlotsInUse, w.Slots, rate(w.MessagesPerS), printable(w.LastHeartbeat))
	}
	fmt.Fprintf(tw, "\ndead letters: %d\n", o.DLQ.Visible)
	return tw.Flush()
}

func sum(m map[string]float64) float64 {
	var t float64
	for _, v := range m {
		t += v
	}
	return t
}

// stateText prints a tenant's state; a gateway that predates pausing says
// none, and its tenants are all active.
func stateText(state string, pauseIngest bool) string {
	switch {
	case state == "":
		return "active"
	case state == "paused" && pauseIngest:
		return "paused+ingest"
	}
	return printable(state)
}
