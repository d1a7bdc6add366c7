package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/fairq/fairq/loadtest/harness"
)

// errExpectations is returned when a run falls short of what the suite
// asserts.
var errExpectations = errors.New("expectations not met")

// suite runs every fault asked for, one after the other, and writes the
// report.
func suite(ctx context.Context, o options, stdout io.Writer, log *slog.Logger) error {
	faults, err := o.pick()
	if err != nil {
		return err
	}
	root, err := harness.ModuleRoot(ctx)
	if err != nil {
		return err
	}
	out := o.out
	if !filepath.IsAbs(out) {
		out = filepath.Join(root, out)
	}
	log.Info("building fairq")
	bin, err := harness.Build(ctx, root, filepath.Join(out, "bin"), false)
	if err != nil {
		return err
	}
	var results []*harness.ChaosResult
	var failed []string
	for _, f := range faults {
		res, err := harness.RunChaos(ctx, harness.ChaosOptions{Fault: f, Binary: bin, Root: root, Dir: filepath.Join(out, f.Name), Logger: log})
		if err != nil {
			return fmt.Errorf("%s: %w", f.Name, err)
		}
		results = append(results, res)
		checks := res.Asserted()
		if o.strict {
			checks = res.Checks
		}
		for _, c := range checks {
			if !c.Pass {
				failed = append(failed, f.Name+": "+c.Name+" "+c.Bound+", measured "+c.Measured)
			}
		}
	}
	env := harness.Environment{Command: o.command, Machine: machine(), Version: harness.BinaryVersion(ctx, bin), Commit: commit(ctx, root), Date: time.Now()}
	report, err := harness.WriteChaosReport(out, results, env)
	if err != nil {
		return err
	}
	stdout.Write(report)
	fmt.Fprintf(stdout, "\nreport, chaos.json and each run's records (fairq.yaml, logs, messages.csv, memory.csv, result.json): %s\n", out)
	if len(failed) > 0 {
		return fmt.Errorf("%w:\n  %s", errExpectations, strings.Join(failed, "\n  "))
	}
	return nil
}

// pick returns the faults asked for, with the flags' overrides.
func (o options) pick() ([]harness.Fault, error) {
	names := harness.FaultNames
	if o.faults != "all" {
		names = strings.Split(o.faults, ",")
	}
	var faults []harness.Fault
	for _, n := range names {
		f, err := harness.NewFault(strings.TrimSpace(n), o.short)
		if err != nil {
			return nil, err
		}
		if o.rate > 0 {
			f.Rate = o.rate
		}
		if o.at > 0 {
			f.At = o.at
		}
		if o.length > 0 {
			f.For = o.length
		}
		if o.after > 0 && f.Attackers > 0 {
			f.After = o.after
		}
		if o.attackers > 0 && f.Attackers > 0 {
			f.Attackers = o.attackers
		}
		if o.repeat > 0 && f.Repeat > 0 {
			f.Repeat = o.repeat
		}
		if o.drain > 0 {
			f.Drain = o.drain
		}
		switch {
		case o.duration > 0:
			f.Duration = o.duration
		case f.Attackers > 0:
			// The slow-body load covers the attack and the watch after it.
			f.Duration = f.At + f.For + f.After + 2*time.Second
		}
		if err := f.Validate(); err != nil {
			return nil, err
		}
		faults = append(faults, f)
	}
	return faults, nil
}

// faultList names the faults for the flag's help.
func faultList() string { return strings.Join(harness.FaultNames, ", ") }

// machine describes this machine: CPU model, CPUs, memory, OS, Go.
func machine() string {
	desc := fmt.Sprintf("%d CPUs, %s/%s, %s", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())
	if mem := harness.MemTotal(); mem > 0 {
		desc = fmt.Sprintf("%.1f GiB, %s", float64(mem)/(1<<30), desc)
	}
	if model := harness.CPUModel(); model != "" {
		desc = model + ", " + desc
	}
	return desc
}

// commit names the source's commit, "+changes" when the work tree differs
// from it; "" outside a git checkout.
func commit(ctx context.Context, root string) string {
	git := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = root
		out, err := cmd.Output()
		return strings.TrimSpace(string(out)), err
	}
	head, err := git("rev-parse", "--short", "HEAD")
	if err != nil {
		return ""
	}
	if st, err := git("status", "--porcelain", "--untracked-files=no"); err == nil && st != "" {
		head += "+changes"
	}
	return head
}
