package main

import (
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/fairq/fairq/internal/testenv"
)

// serverForbidden are packages the server binary must not link: the
// simulator and its charts, whose plotting libraries (fonts, PDF, LaTeX)
// would add megabytes to a binary that never draws.
var serverForbidden = []string{
	"gonum.org/v1/plot",
	"github.com/fairq/fairq/sharding/sim",
	"github.com/fairq/fairq/internal/chart",
}

// TestServerDependencies: the server links none of serverForbidden, and
// the check finds them where they are, in the simulator.
func TestServerDependencies(t *testing.T) {
	t.Parallel()
	if got := forbiddenDeps(t, "."); len(got) > 0 {
		t.Errorf("fairq links %s; the simulator and its charts belong in cmd/fairq-sim", strings.Join(got, ", "))
	}
	// Negative control: the simulator does link gonum.org/v1/plot, so a
	// check that found nothing anywhere would fail here.
	if got := forbiddenDeps(t, "../fairq-sim"); !slices.Contains(got, "gonum.org/v1/plot") {
		t.Errorf("fairq-sim: forbidden dependencies %v, want gonum.org/v1/plot among them", got)
	}
}

// forbiddenDeps returns the packages of serverForbidden, or under them,
// that the package in dir depends on, as `go list -deps` reports them.
func forbiddenDeps(t *testing.T, dir string) []string {
	t.Helper()
	out, err := exec.Command(goTool(t), "list", "-deps", dir).Output()
	if err != nil {
		var stderr string
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go list -deps %s: %v\n%s", dir, err, stderr)
	}
	var found []string
	for pkg := range strings.FieldsSeq(string(out)) {
		for _, f := range serverForbidden {
			if pkg == f || strings.HasPrefix(pkg, f+"/") {
				found = append(found, pkg)
			}
		}
	}
	if !strings.Contains(string(out), "github.com/fairq/fairq/") {
		t.Fatalf("go list -deps %s lists no package of this module:\n%s", dir, out)
	}
	return found
}

// goTool returns the go command (go test puts its own first on PATH).
func goTool(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	if os.Getenv(testenv.RequireEnv) == "1" {
		t.Fatalf("the go command is not installed (%s=1, so this fails instead of skipping)", testenv.RequireEnv)
	}
	t.Skip("the go command is not installed; install Go to check the server's dependencies")
	return ""
}
