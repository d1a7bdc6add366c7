package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fairq/fairq/tenant"
)

// apiTenant is a tenant as the admin API shows it. Limits and overrides
// stay JSON values so that a limit added to the API later is shown, and
// kept by `tenants set`, without a new release of this command.
type apiTenant struct {
	ID        string                     `json:"id"`
	Limits    map[string]json.RawMessage `json:"limits"`
	Overrides map[string]json.RawMessage `json:"overrides"`
	Keys      []struct {
		KeyID     string `json:"key_id"`
		CreatedAt string `json:"created_at"`
	} `json:"keys"`
	Source       string  `json:"source"`
	State        string  `json:"state"`
	PauseIngest  bool    `json:"pause_ingest"`
	PurgedBefore *string `json:"purged_before"`
}

// limitKind says how `tenants set` reads a limit's value.
type limitKind int

const (
	limitRate     limitKind = iota // messages per second, a decimal number
	limitCount                     // a whole number
	limitDuration                  // a Go duration: 30s, 72h
)

// limitSpec is one limit of a tenant.
type limitSpec struct {
	name string
	kind limitKind
}

// tenantLimits are a tenant's limits in the order tables show them.
var tenantLimits = []limitSpec{
	{"ingest_rate", limitRate},
	{"ingest_burst", limitCount},
	{"process_rate", limitRate},
	{"process_burst", limitCount},
	{"concurrency", limitCount},
	{"soft_backlog", limitCount},
	{"max_backlog", limitCount},
	{"drop_age", limitDuration},
}

// tenantPath is the API path of a tenant, checked first so that an id the
// gateway cannot hold is a usage error rather than a request.
func tenantPath(id string) (string, error) {
	if !tenant.ValidID(id) {
		return "", fmt.Errorf("%w: %q is not a tenant id: 1–%d letters, digits, '-', '_' or '.'", errUsage, id, tenant.MaxIDLength)
	}
	return "/tenants/" + url.PathEscape(id), nil
}

func runTenantsList(ctx context.Context, e env, args []string) error {
	return adminCommand{
		use:     "tenants list",
		summary: "List every tenant with its state and main limits.",
		example: "fairq tenants list\nfairq tenants list --json | jq -r '.tenants[] | select(.state == \"paused\") | .id'",
		run: func(ctx context.Context, s *adminSession, _ []string) error {
			_, data, err := s.c.call(ctx, "GET", "/tenants", nil, nil)
			if err != nil {
				return err
			}
			if s.json {
				return writeRaw(s.stdout, data)
			}
			var ans struct {
				Tenants []apiTenant `json:"tenants"`
			}
			if err := decodeAnswer("GET /admin/v1/tenants", data, &ans); err != nil {
				return err
			}
			tw := newTable(s.stdout)
			fmt.Fprintln(tw, "TENANT\tSTATE\tSOURCE\tINGEST/S\tPROCESS/S\tCONCURRENCY\tMAX BACKLOG\tKEYS")
			for _, t := range ans.Tenants {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\n", t.ID, stateText(t.State, t.PauseIngest), printable(t.Source),
					limitText(t.Limits["ingest_rate"]), limitText(t.Limits["process_rate"]),
					limitText(t.Limits["concurrency"]), limitText(t.Limits["max_backlog"]), len(t.Keys))
			}
			return tw.Flush()
		},
	}.main(ctx, e, args)
}

func runTenantsShow(ctx context.Context, e env, args []string) error {
	return adminCommand{
		use:     "tenants show ID",
		summary: "Show a tenant: its state, its keys (their ids, never the keys) and each limit, with whether the tenant sets it or follows the defaults.",
		example: "fairq tenants show acme",
		nargs:   1,
		run: func(ctx context.Context, s *adminSession, args []string) error {
			path, err := tenantPath(args[0])
			if err != nil {
				return err
			}
			_, data, err := s.c.call(ctx, "GET", path, nil, nil)
			if err != nil {
				return err
			}
			return s.printTenant(data)
		},
	}.main(ctx, e, args)
}

// printTenant prints an answer holding one tenant.
func (s *adminSession) printTenant(data []byte) error {
	if s.json {
		return writeRaw(s.stdout, data)
	}
	var t apiTenant
	if err := decodeAnswer("the tenant", data, &t); err != nil {
		return err
	}
	tw := newTable(s.stdout)
	fmt.Fprintf(tw, "tenant\t%s\n", t.ID)
	fmt.Fprintf(tw, "state\t%s\n", stateDetail(t.State, t.PauseIngest))
	fmt.Fprintf(tw, "source\t%s\n", printable(t.Source))
	if t.PurgedBefore != nil {
		fmt.Fprintf(tw, "purged\tmessages enqueued before %s are deleted unseen\n", printable(*t.PurgedBefore))
	}
	keys := make([]string, 0, len(t.Keys))
	for _, k := range t.Keys {
		if k.CreatedAt != "" {
			keys = append(keys, fmt.Sprintf("%s (%s)", printable(k.KeyID), printable(k.CreatedAt)))
		} else {
			keys = append(keys, printable(k.KeyID))
		}
	}
	if len(keys) == 0 {
		keys = append(keys, "none")
	}
	fmt.Fprintf(tw, "keys\t%s\n", strings.Join(keys, ", "))
	fmt.Fprintln(tw, "\nLIMIT\tVALUE\tSET BY")
	for _, name := range limitNames(t.Limits) {
		by := "defaults"
		if _, ok := t.Overrides[name]; ok {
			by = "tenant"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", printable(name), limitText(t.Limits[name]), by)
	}
	return tw.Flush()
}

// limitNames returns the known limits in order, then any other the
// gateway shows, sorted.
func limitNames(limits map[string]json.RawMessage) []string {
	var names, other []string
	for _, l := range tenantLimits {
		names = append(names, l.name)
	}
	for name := range limits {
		if !slices.Contains(names, name) {
			other = append(other, name)
		}
	}
	slices.Sort(other)
	return append(names, other...)
}

// limitText prints a limit's JSON value: a number as it is, a duration
// without its quotes, an absent one as "-".
func limitText(v json.RawMessage) string {
	var s string
	switch {
	case len(v) == 0 || string(v) == "null":
		return "-"
	case json.Unmarshal(v, &s) == nil:
		return printable(s)
	}
	return printable(string(v))
}

// stateDetail says what a tenant's state means.
func stateDetail(state string, pauseIngest bool) string {
	switch {
	case state == "paused" && pauseIngest:
		return "paused: its new messages are refused (423 tenant_paused), those queued wait"
	case state == "paused":
		return "paused: its messages are accepted and wait, none is started"
	}
	return stateText(state, pauseIngest)
}

func runTenantsSet(ctx context.Context, e env, args []string) error {
	var names []string
	for _, l := range tenantLimits {
		names = append(names, l.name)
	}
	return adminCommand{
		use: "tenants set ID KEY=VALUE…",
		summary: "Set some of a tenant's limits, creating the tenant if it does not exist; the limits not named keep their value. " +
			"KEY=default (or KEY=) makes a limit follow the defaults again. Keys: " + strings.Join(names, ", ") + ".",
		example: "fairq tenants set acme ingest_rate=500 ingest_burst=1000\nfairq tenants set acme concurrency=default drop_age=72h",
		nargs:   -1,
		run: func(ctx context.Context, s *adminSession, args []string) error {
			path, err := tenantPath(args[0])
			if err != nil {
				return err
			}
			changes, err := parseLimits(args[1:])
			if err != nil {
				return err
			}
			// The API replaces a tenant's limits as a whole: read them,
			// change those named, write them back. Two admins setting the
			// same tenant at once may undo each other's change.
			overrides := map[string]json.RawMessage{}
			_, data, err := s.c.call(ctx, "GET", path, nil, nil)
			var ee *exitError
			switch {
			case errors.As(err, &ee) && ee.code == exitNotFound:
				// A new tenant.
			case err != nil:
				return err
			default:
				var t apiTenant
				if err := decodeAnswer("GET "+path, data, &t); err != nil {
					return err
				}
				if t.Overrides != nil {
					overrides = t.Overrides
				}
			}
			for name, v := range changes {
				if v == nil {
					delete(overrides, name)
				} else {
					overrides[name] = v
				}
			}
			status, data, err := s.c.call(ctx, "PUT", path, nil, overrides)
			if err != nil {
				return err
			}
			if status == http.StatusCreated {
				fmt.Fprintf(s.stderr, "created tenant %s\n", args[0])
			}
			return s.printTenant(data)
		},
	}.main(ctx, e, args)
}

// parseLimits reads KEY=VALUE arguments into JSON values, nil for a limit
// set back to the defaults.
func parseLimits(args []string) (map[string]json.RawMessage, error) {
	if len(args) == 0 {
		return nil, fmt.Errorf("%w: name at least one limit: fairq tenants set ID KEY=VALUE…", errUsage)
	}
	out := map[string]json.RawMessage{}
	for _, a := range args {
		name, value, ok := strings.Cut(a, "=")
		i := slices.IndexFunc(tenantLimits, func(l limitSpec) bool { return l.name == name })
		switch {
		case !ok:
			return nil, fmt.Errorf("%w: %q: want KEY=VALUE", errUsage, a)
		case i < 0:
			return nil, fmt.Errorf("%w: %q is not a limit (see --help)", errUsage, name)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%w: %s is given twice", errUsage, name)
		}
		if value == "" || value == "default" {
			out[name] = nil
			continue
		}
		var v any
		switch tenantLimits[i].kind {
		case limitRate:
			f, err := strconv.ParseFloat(value, 64)
			if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
				return nil, fmt.Errorf("%w: %s=%s: want a number of messages per second", errUsage, name, value)
			}
			v = f
		case limitCount:
			n, err := strconv.ParseInt(value, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%w: %s=%s: want a whole number", errUsage, name, value)
			}
			v = n
		case limitDuration:
			d, err := time.ParseDuration(value)
			if err != nil {
				return nil, fmt.Errorf("%w: %s=%s: want a duration such as 30s or 72h", errUsage, name, value)
			}
			v = d.String()
		}
		b, _ := json.Marshal(v) // a number or a string
		out[name] = b
	}
	return out, nil
}

func runTenantsPause(ctx context.Context, e env, args []string) error {
	var ingest bool
	return adminCommand{
		use: "tenants pause ID [--ingest]",
		summary: "Pause a tenant: workers start none of its messages, which wait in the queues, until it is resumed. " +
			"With --ingest the gateway also refuses its new messages (423 tenant_paused). Pausing again without --ingest accepts them again.",
		example: "fairq tenants pause acme\nfairq tenants pause acme --ingest",
		nargs:   1,
		flags: func(fs *flag.FlagSet) {
			fs.BoolVar(&ingest, "ingest", false, "also refuse the tenant's new messages")
		},
		run: func(ctx context.Context, s *adminSession, args []string) error {
			path, err := tenantPath(args[0])
			if err != nil {
				return err
			}
			_, data, err := s.c.call(ctx, "POST", path+"/pause", nil, map[string]bool{"pause_ingest": ingest})
			if err != nil {
				return err
			}
			return s.printTenant(data)
		},
	}.main(ctx, e, args)
}

func runTenantsResume(ctx context.Context, e env, args []string) error {
	return adminCommand{
		use:     "tenants resume ID",
		summary: "Resume a paused tenant: its waiting messages start again and new ones are accepted.",
		example: "fairq tenants resume acme",
		nargs:   1,
		run: func(ctx context.Context, s *adminSession, args []string) error {
			path, err := tenantPath(args[0])
			if err != nil {
				return err
			}
			_, data, err := s.c.call(ctx, "POST", path+"/resume", nil, struct{}{})
			if err != nil {
				return err
			}
			return s.printTenant(data)
		},
	}.main(ctx, e, args)
}

func runTenantsPurge(ctx context.Context, e env, args []string) error {
	return adminCommand{
		use: "tenants purge ID",
		summary: "Purge a tenant's queued messages: every message of the tenant enqueued before now is deleted unseen when a worker receives it, " +
			"and never reaches the application. Messages enqueued afterwards are delivered as usual. This cannot be undone.",
		example: "fairq tenants purge acme",
		nargs:   1,
		run: func(ctx context.Context, s *adminSession, args []string) error {
			path, err := tenantPath(args[0])
			if err != nil {
				return err
			}
			_, data, err := s.c.call(ctx, "POST", path+"/purge", nil, nil)
			if err != nil {
				return err
			}
			if s.json {
				return writeRaw(s.stdout, data)
			}
			var ans struct {
				Tenant       string `json:"tenant"`
				PurgedBefore string `json:"purged_before"`
			}
			if err := decodeAnswer("POST "+path+"/purge", data, &ans); err != nil {
				return err
			}
			fmt.Fprintf(s.stdout, "tenant %s: its messages enqueued before %s are deleted unseen\n", args[0], printable(ans.PurgedBefore))
			return nil
		},
	}.main(ctx, e, args)
}

func runKeysIssue(ctx context.Context, e env, args []string) error {
	return adminCommand{
		use: "keys issue ID",
		summary: "Make a new API key for a tenant. The key is printed once, alone on stdout, and never again: " +
			"the gateway keeps only its sha256. Its id (for keys revoke) goes to stderr.",
		example: "KEY=$(fairq keys issue acme)",
		nargs:   1,
		run: func(ctx context.Context, s *adminSession, args []string) error {
			path, err := tenantPath(args[0])
			if err != nil {
				return err
			}
			_, data, err := s.c.call(ctx, "POST", path+"/keys", nil, nil)
			if err != nil {
				return err
			}
			if s.json {
				return writeRaw(s.stdout, data)
			}
			var ans struct {
				KeyID string `json:"key_id"`
				Key   string `json:"key"`
			}
			if err := decodeAnswer("POST "+path+"/keys", data, &ans); err != nil {
				return err
			}
			fmt.Fprintf(s.stderr, "key %s of tenant %s: shown this once, keep it\n", printable(ans.KeyID), args[0])
			_, err = fmt.Fprintln(s.stdout, printable(ans.Key))
			return err
		},
	}.main(ctx, e, args)
}

func runKeysRevoke(ctx context.Context, e env, args []string) error {
	return adminCommand{
		use:     "keys revoke ID KEY_ID",
		summary: "Revoke one API key of a tenant (its id is in `fairq tenants show ID`); requests with it are refused within a second on every gateway.",
		example: "fairq keys revoke acme 3f9a1c0e5b7d2a84",
		nargs:   2,
		run: func(ctx context.Context, s *adminSession, args []string) error {
			path, err := tenantPath(args[0])
			if err != nil {
				return err
			}
			if args[1] == "" {
				return fmt.Errorf("%w: an empty key id", errUsage)
			}
			if _, _, err := s.c.call(ctx, "DELETE", path+"/keys/"+url.PathEscape(args[1]), nil, nil); err != nil {
				return err
			}
			if !s.json {
				fmt.Fprintf(s.stdout, "revoked key %s of tenant %s\n", printable(args[1]), args[0])
			}
			return nil
		},
	}.main(ctx, e, args)
}
