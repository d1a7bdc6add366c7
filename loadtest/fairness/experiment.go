package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
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
	redis      string
	out        string
	short      bool
	noBaseline bool
	// baselineAfter runs a fleet run's baseline again after it.
	baselineAfter bool
	// control runs a fleet run's contention control after its baselines.
	control bool
	// inHarness keeps a fleet run's application and clients in the
	// harness's process, as the other modes have them.
	inHarness bool
	figures   string
	render    bool
	command   string
}

// fleetPhases are the runs of a fleet experiment, in order: the baseline
// (the quiet tenants alone), the run, and the baseline again, so that a
// drift of the machine over the experiment is seen, and shared by the
// run's two sides, rather than taken for the noisy tenant's doing.
var fleetPhases = []struct {
	baseline, after bool
	suffix          string // of the run's directory
}{{true, false, "-baseline"}, {false, false, ""}, {true, true, "-baseline-after"}}

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
	// Fleet runs are judged on their own, not side by side with the
	// other modes.
	fleet := slices.Contains(modes, harness.ModeFleet)
	modes = slices.DeleteFunc(modes, func(m harness.Mode) bool { return m == harness.ModeFleet })
	var topologies []string
	if fleet {
		if o.backend != "auto" && o.backend != "sqs" {
			return fmt.Errorf("fleet mode runs on the sqs backend, not %q", o.backend)
		}
		// Four workers stopped with SIGTERM take up to a long poll (20 s)
		// to exit, longer than the short outage lasts.
		if o.short {
			return errors.New("fleet mode runs the full scenarios, not -short")
		}
		if topologies, err = parseTopologies(o.redis); err != nil {
			return err
		}
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
	app, clients, burner := "", "", ""
	if !o.render {
		log.Info("building fairq")
		if bin, err = harness.Build(ctx, root, filepath.Join(out, "bin"), false); err != nil {
			return err
		}
		if fleet && !o.inHarness {
			if app, err = harness.BuildApp(ctx, root, filepath.Join(out, "bin")); err != nil {
				return err
			}
			if clients, err = harness.BuildClients(ctx, root, filepath.Join(out, "bin")); err != nil {
				return err
			}
		}
		if fleet && o.control {
			if burner, err = harness.BuildBurner(ctx, root, filepath.Join(out, "bin")); err != nil {
				return err
			}
		}
	}

	var svc, cluster *harness.LocalServices
	defer func() {
		for _, s := range []*harness.LocalServices{cluster, svc} {
			if s != nil {
				s.Stop(context.WithoutCancel(ctx))
			}
		}
	}()
	// localServices returns the local services, started on first use:
	// fauxqs and a redis-server, and withCluster a Redis Cluster in place
	// of the redis-server.
	localServices := func(withCluster bool) (harness.Services, error) {
		if svc == nil {
			log.Info("starting redis-server and the fauxqs SQS emulator")
			if svc, err = harness.StartLocalServices(ctx, root, filepath.Join(out, "services")); err != nil {
				return harness.Services{}, err
			}
		}
		if !withCluster {
			return svc.Services, nil
		}
		if cluster == nil {
			log.Info("starting a Redis Cluster", "masters", 3)
			if cluster, err = harness.StartLocalCluster(ctx, filepath.Join(out, "services", "cluster"), 3); err != nil {
				return harness.Services{}, err
			}
		}
		return svc.WithCluster(cluster), nil
	}
	var results []*harness.ScenarioResult
	unbalanced := 0
	for _, sc := range scenarios {
		if len(modes) == 0 {
			break
		}
		backend := o.backend
		if backend == "auto" {
			backend = "memory"
			if sc.Outage.For > 0 {
				backend = "sqs"
			}
		}
		var services harness.Services
		if backend == "sqs" && !o.render {
			if services, err = localServices(false); err != nil {
				return err
			}
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
	var fleets []*harness.FleetResult
	for _, sc := range scenarios {
		if !fleet {
			break
		}
		for _, topo := range topologies {
			fr := &harness.FleetResult{Scenario: sc, Redis: topo}
			var services harness.Services
			if !o.render {
				if services, err = localServices(topo == harness.RedisCluster); err != nil {
					return err
				}
			}
			for _, ph := range fleetPhases {
				if (ph.baseline && (!sc.Baseline || o.noBaseline)) || (ph.after && !o.baselineAfter) {
					continue
				}
				dir := filepath.Join(out, sc.Name, string(harness.ModeFleet)+"-"+topo) + ph.suffix
				var res *harness.Result
				if o.render {
					if res, err = harness.LoadResult(dir); err != nil {
						if ph.after && errors.Is(err, fs.ErrNotExist) {
							continue // records from before the baseline was run again
						}
						return err
					}
				} else {
					res, err = harness.Run(ctx, harness.Options{
						Scenario: sc, Mode: harness.ModeFleet, Baseline: ph.baseline, Backend: "sqs", Services: services,
						Binary: bin, App: app, Clients: clients, Dir: dir, Logger: log.With("redis", topo),
					})
					if err != nil {
						return fmt.Errorf("%s, %s: %w", sc.Name, filepath.Base(dir), err)
					}
				}
				if res.Accounting.Lost > 0 || !res.Drained {
					unbalanced++
				}
				switch {
				case ph.after:
					fr.BaselineAfter = res
				case ph.baseline:
					fr.Baseline = res
				default:
					fr.Run = res
				}
			}
			if o.control && sc.Baseline && !o.noBaseline {
				dir := filepath.Join(out, sc.Name, string(harness.ModeFleet)+"-"+topo) + "-control"
				if fr.Control, err = control(ctx, o, fr, dir, harness.Options{
					Scenario: sc, Mode: harness.ModeFleet, Baseline: true, Backend: "sqs", Services: services,
					Binary: bin, App: app, Clients: clients, Burner: burner, Dir: dir, Logger: log.With("redis", topo, "control", true),
				}); err != nil {
					return fmt.Errorf("%s, %s: %w", sc.Name, filepath.Base(dir), err)
				}
				if c := fr.Control; c != nil && (c.Accounting.Lost > 0 || !c.Drained) {
					unbalanced++
				}
			}
			fleets = append(fleets, fr)
		}
	}

	env := harness.Environment{Command: o.command, Machine: machine(), Version: harness.BinaryVersion(ctx, bin), Date: time.Now()}
	if len(modes) > 0 {
		report, err := harness.WriteReport(out, results, env)
		if err != nil {
			return err
		}
		stdout.Write(report)
	}
	if len(fleets) > 0 {
		report, err := harness.WriteFleetReport(out, fleets, env)
		if err != nil {
			return err
		}
		stdout.Write(report)
	}
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

// control runs fr's contention control with opts, burning
// harness.ControlCores(fr), or with -render reads its records from dir. It
// returns nil where there is nothing to burn (no CPU use was read) or,
// rendering, no records: an experiment run with -control=false.
func control(ctx context.Context, o options, fr *harness.FleetResult, dir string, opts harness.Options) (*harness.Result, error) {
	if o.render {
		res, err := harness.LoadResult(dir)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return res, err
	}
	if opts.Burn = harness.ControlCores(fr); opts.Burn == 0 {
		return nil, nil
	}
	return harness.Run(ctx, opts)
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

// parseTopologies parses -redis: single, cluster, or both, comma-separated.
func parseTopologies(s string) ([]string, error) {
	var ts []string
	for _, t := range strings.Split(s, ",") {
		switch t = strings.TrimSpace(t); t {
		case harness.RedisSingle, harness.RedisCluster:
			if !slices.Contains(ts, t) {
				ts = append(ts, t)
			}
		default:
			return nil, fmt.Errorf("unknown Redis topology %q (want single or cluster)", t)
		}
	}
	return ts, nil
}
