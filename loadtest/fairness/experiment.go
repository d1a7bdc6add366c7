package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/fairq/fairq/loadtest/harness"
)

// options are the command's flags.
type options struct {
	scenarios  string
	modes      string
	backend    string
	out        string
	short      bool
	noBaseline bool
	figures    string
	render     bool
	command    string
}

// errUnbalanced is returned when a run's accounting does not balance.
var errUnbalanced = errors.New("accounting does not balance")

// experiment runs every scenario asked for in every mode, then writes the
// report; with render it only draws the report again from the records of
// an earlier experiment.
func experiment(ctx context.Context, o options, stdout io.Writer, log *slog.Logger) error {
	root, err := harness.ModuleRoot(ctx)
	if err != nil {
		return err
	}
	out := o.out
	if !filepath.IsAbs(out) {
		out = filepath.Join(root, out)
	}
	modes, err := harness.ParseModes(o.modes)
	if err != nil {
		return err
	}
	names := harness.ScenarioNames
	if o.scenarios != "all" {
		names = strings.Split(o.scenarios, ",")
	}
	var scenarios []harness.Scenario
	for _, n := range names {
		sc, err := harness.NewScenario(strings.TrimSpace(n), o.short)
		if err != nil {
			return err
		}
		scenarios = append(scenarios, sc)
	}
	bin := filepath.Join(out, "bin", "fairq")
	if !o.render {
		log.Info("building fairq")
		if bin, err = harness.Build(ctx, root, filepath.Join(out, "bin"), false); err != nil {
			return err
		}
	}

	var svc *harness.LocalServices
	defer func() {
		if svc != nil {
			svc.Stop(context.WithoutCancel(ctx))
		}
	}()
	var results []*harness.ScenarioResult
	unbalanced := 0
	for _, sc := range scenarios {
		backend := o.backend
		if backend == "auto" {
			backend = "memory"
			if sc.Outage.For > 0 {
				backend = "sqs"
			}
		}
		var services harness.Services
		if backend == "sqs" && !o.render {
			if svc == nil {
				log.Info("starting redis-server and the fauxqs SQS emulator")
				if svc, err = harness.StartLocalServices(ctx, root, filepath.Join(out, "services")); err != nil {
					return err
				}
			}
			services = svc.Services
		}
		sr := &harness.ScenarioResult{Scenario: sc}
		// Runs of the modes not asked for this time are reported from
		// their records, if an earlier experiment left some in -out.
		for _, m := range harness.Modes {
			if slices.Contains(modes, m) || o.render {
				continue
			}
			for _, suffix := range []string{"-baseline", ""} {
				if res, err := harness.LoadResult(filepath.Join(out, sc.Name, string(m)+suffix)); err == nil {
					sr.Add(res)
				}
			}
		}
		for _, m := range modes {
			for _, baseline := range []bool{true, false} {
				if baseline && (!sc.Baseline || o.noBaseline) {
					continue
				}
				dir := filepath.Join(out, sc.Name, string(m))
				if baseline {
					dir += "-baseline"
				}
				var res *harness.Result
				if o.render {
					if res, err = harness.LoadResult(dir); err != nil {
						return err
					}
				} else {
					res, err = harness.Run(ctx, harness.Options{
						Scenario: sc, Mode: m, Baseline: baseline, Backend: backend, Services: services,
						Binary: bin, Dir: dir, Logger: log,
					})
					if err != nil {
						return fmt.Errorf("%s, %s: %w", sc.Name, filepath.Base(dir), err)
					}
				}
				if !res.Accounting.Balanced() || !res.Drained {
					unbalanced++
				}
				sr.Add(res)
			}
		}
		results = append(results, sr)
	}
	env := harness.Environment{Command: o.command, Machine: machine(), Version: harness.BinaryVersion(ctx, bin), Date: time.Now()}
	report, err := harness.WriteReport(out, results, env)
	if err != nil {
		return err
	}
	stdout.Write(report)
	fmt.Fprintf(stdout, "\nreport, charts and each run's records (fairq.yaml, logs, messages.csv, result.json): %s\n", out)
	if o.figures != "" {
		figs := o.figures
		if !filepath.IsAbs(figs) {
			figs = filepath.Join(root, figs)
		}
		if err := copyCharts(out, figs, results); err != nil {
			return err
		}
	}
	if unbalanced > 0 {
		return fmt.Errorf("%w in %d runs", errUnbalanced, unbalanced)
	}
	return nil
}

// copyCharts copies each scenario's chart from out to dir.
func copyCharts(out, dir string, rs []*harness.ScenarioResult) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, r := range rs {
		name := r.Scenario.Name + ".png"
		data, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// machine describes this machine.
func machine() string {
	desc := fmt.Sprintf("%d CPUs, %s/%s, %s", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				return strings.TrimSpace(v) + ", " + desc
			}
		}
	}
	return desc
}
