// Command k6run runs fairq's k6 load scripts (loadtest/k6) as a user
// would: it builds fairq, generates a configuration with fresh API keys
// for ten quiet tenants and a noisy one, and for each script starts
// `fairq dev` afresh, runs `k6 run` with the keys file, and reports
// whether the script's thresholds held.
//
//	go run ./loadtest/k6run                       # every script, 30 s each
//	go run ./loadtest/k6run -script noisy,burst
//	go run ./loadtest/k6run -short                # a few seconds each (CI smoke)
//
// The keys file, the configuration, fairq's logs and k6's summaries go
// to -out (loadtest/out/k6). With that keys file the scripts also run
// against a fairq started by hand:
//
//	k6 run -e KEYS_FILE=$PWD/loadtest/out/k6/keys.json -e BASE_URL=http://127.0.0.1:8080 loadtest/k6/steady.js
//
// (BASE_URL must then be a fairq loaded with loadtest/out/k6/fairq.yaml.)
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/fairq/fairq/loadtest/harness"
	"github.com/fairq/fairq/tenant"
)

// scripts are the scenario scripts, in the order they run.
var scripts = []string{"steady", "noisy", "burst", "bad-traffic"}

// Limits of the generated configuration: every tenant may enqueue 50
// messages/s (bursts of 100); the scripts' quiet tenants stay inside, the
// noisy tenant and the burst go over.
const (
	quietTenants = 10
	ingestRate   = 50
	ingestBurst  = 100
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

type options struct {
	scripts string
	k6      string
	out     string
	short   bool
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("k6run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.scripts, "script", "all", "scripts to run, comma-separated: "+strings.Join(scripts, ", ")+", or all")
	fs.StringVar(&o.k6, "k6", "", "the k6 binary (default: k6 on PATH, else $(go env GOPATH)/bin/k6)")
	fs.StringVar(&o.out, "out", "loadtest/out/k6", "output directory (relative to the module root)")
	fs.BoolVar(&o.short, "short", false, "run each script for a few seconds (SHORT=1)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "k6run: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	failed, err := runScripts(ctx, o, stdout, log)
	if err != nil {
		fmt.Fprintf(stderr, "k6run: %v\n", err)
		return 1
	}
	if len(failed) > 0 {
		fmt.Fprintf(stderr, "k6run: thresholds failed in %s\n", strings.Join(failed, ", "))
		return 1
	}
	return 0
}

// keysFile is what the scripts read (loadtest/k6/lib/tenants.js).
type keysFile struct {
	BaseURL string      `json:"base_url"`
	Tenants []keyTenant `json:"tenants"`
}

type keyTenant struct {
	ID   string `json:"id"`
	Key  string `json:"key"`
	Role string `json:"role"`
}

// runScripts runs each script against its own `fairq dev` and returns the
// scripts whose thresholds failed.
func runScripts(ctx context.Context, o options, stdout io.Writer, log *slog.Logger) ([]string, error) {
	names := scripts
	if o.scripts != "all" {
		names = strings.Split(o.scripts, ",")
		for _, n := range names {
			if !slices.Contains(scripts, n) {
				return nil, fmt.Errorf("unknown script %q (want %s)", n, strings.Join(scripts, ", "))
			}
		}
	}
	root, err := harness.ModuleRoot(ctx)
	if err != nil {
		return nil, err
	}
	out := o.out
	if !filepath.IsAbs(out) {
		out = filepath.Join(root, out)
	}
	k6, err := findK6(ctx, o.k6)
	if err != nil {
		return nil, err
	}
	log.Info("building fairq")
	bin, err := harness.Build(ctx, root, filepath.Join(out, "bin"), false)
	if err != nil {
		return nil, err
	}
	keys, config := generate()
	var failed []string
	for _, name := range names {
		ok, err := runScript(ctx, root, out, bin, k6, name, keys, config, o.short, stdout, log)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if !ok {
			failed = append(failed, name)
		}
	}
	return failed, nil
}

// runScript starts fairq dev, runs one script and stops fairq; it reports
// whether the thresholds held.
func runScript(ctx context.Context, root, out, bin, k6, name string, keys keysFile, config []byte, short bool, stdout io.Writer, log *slog.Logger) (bool, error) {
	dir := filepath.Join(out, name)
	dev, err := harness.StartDev(ctx, bin, dir, config)
	if err != nil {
		return false, err
	}
	defer dev.Stop(context.WithoutCancel(ctx))
	keys.BaseURL = dev.URL
	keysPath := filepath.Join(out, "keys.json")
	data, _ := json.MarshalIndent(keys, "", "  ") // cannot fail: strings
	if err := os.WriteFile(keysPath, data, 0o600); err != nil {
		return false, err
	}
	args := []string{"run", "--quiet", "-e", "KEYS_FILE=" + keysPath, "--summary-export", filepath.Join(dir, "summary.json")}
	if short {
		args = append(args, "-e", "SHORT=1")
	}
	args = append(args, filepath.Join(root, "loadtest", "k6", name+".js"))
	log.Info("k6 run", "script", name, "fairq", dev.URL)
	f, err := os.Create(filepath.Join(dir, "k6.txt"))
	if err != nil {
		return false, err
	}
	defer f.Close()
	cmd := exec.CommandContext(ctx, k6, args...)
	cmd.Dir = root
	cmd.Stdout = io.MultiWriter(stdout, f)
	cmd.Stderr = io.MultiWriter(stdout, f)
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return true, dev.Stop(ctx)
	case errors.As(err, &exit) && exit.ExitCode() == 99: // k6: thresholds failed
		return false, dev.Stop(ctx)
	}
	return false, fmt.Errorf("k6: %w", err)
}

// generate returns fresh keys for the tenants and the fairq configuration
// that knows their hashes.
func generate() (keysFile, []byte) {
	var keys keysFile
	var b strings.Builder
	fmt.Fprintf(&b, "# fairq configuration of the k6 load tests, written by go run ./loadtest/k6run.\n")
	fmt.Fprintf(&b, "listen: 127.0.0.1:0\nlog: {level: warn}\n")
	fmt.Fprintf(&b, "defaults: {ingest_rate: %d, ingest_burst: %d, soft_backlog: 100000, max_backlog: 1000000}\n", ingestRate, ingestBurst)
	fmt.Fprintf(&b, "tenants:\n")
	add := func(id, role string) {
		var r [24]byte
		rand.Read(r[:]) // never fails (crypto/rand)
		key := "fq_k6_" + hex.EncodeToString(r[:])
		keys.Tenants = append(keys.Tenants, keyTenant{ID: id, Key: key, Role: role})
		fmt.Fprintf(&b, "  - {id: %s, api_keys: [%q]}\n", id, tenant.HashKey(key))
	}
	for i := range quietTenants {
		add(fmt.Sprintf("t%02d", i+1), "quiet")
	}
	add("noisy", "noisy")
	return keys, []byte(b.String())
}

// findK6 returns the k6 binary to run.
func findK6(ctx context.Context, flagValue string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	if p, err := exec.LookPath("k6"); err == nil {
		return p, nil
	}
	gopath, err := exec.CommandContext(ctx, "go", "env", "GOPATH").Output()
	if err == nil {
		p := filepath.Join(strings.TrimSpace(string(gopath)), "bin", "k6")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("k6 not found: run `make loadtest-deps` (GOFLAGS= go install go.k6.io/k6@v1.8.1)")
}
