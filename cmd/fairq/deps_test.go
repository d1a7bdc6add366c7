package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fairq/fairq/internal/testenv"
)

// serverForbidden are packages the server binary must not link: the
// simulator and its charts, whose plotting libraries (fonts, PDF, LaTeX)
// would add megabytes to a binary that never draws; the template
// packages, which call methods by name through reflection, so that the
// linker keeps every exported method of every type in an interface (they
// took the binary from 28 to 42 MB); gRPC, which an OTLP exporter can
// pull in through the collector's generated services (with
// golang.org/x/net/trace, and so html/template, behind it);
// goccy/go-json, whose encoder VMs are linked whether used or not; and
// the tests' OpenAPI validator and the helpers that hold it, for tests
// only.
var serverForbidden = []string{
	"gonum.org/v1/plot",
	"github.com/fairq/fairq/sharding/sim",
	"github.com/fairq/fairq/internal/chart",
	"html/template",
	"text/template",
	"google.golang.org/grpc",
	"github.com/goccy/go-json",
	"github.com/pb33f",
	"github.com/fairq/fairq/gateway/gatewaytest",
	"github.com/fairq/fairq/gateway/openapitest",
}

// TestServerDependencies: the server links none of serverForbidden, and
// the check finds them where they are, in the simulator and in the
// gateway's test helpers.
func TestServerDependencies(t *testing.T) {
	t.Parallel()
	if got := forbiddenDeps(t, "."); len(got) > 0 {
		t.Errorf("fairq links %s, which the server binary must not (see serverForbidden)", strings.Join(got, ", "))
	}
	// Negative control: the simulator does link gonum.org/v1/plot, so a
	// check that found nothing anywhere would fail here.
	if got := forbiddenDeps(t, "../fairq-sim"); !slices.Contains(got, "gonum.org/v1/plot") {
		t.Errorf("fairq-sim: forbidden dependencies %v, want gonum.org/v1/plot among them", got)
	}
	if got := forbiddenDeps(t, "../../gateway/openapitest"); !slices.Contains(got, "github.com/pb33f/libopenapi-validator") {
		t.Errorf("openapitest: forbidden dependencies %v, want github.com/pb33f/libopenapi-validator among them", got)
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

// releaseSizeLimit bounds the binary a release ships, built as `make
// build` builds it.
const releaseSizeLimit = 25_000_000

// TestServerBinarySize builds the server as a release does (no cgo, no
// symbol table or DWARF) and holds it to releaseSizeLimit; a plain `go
// build`, with DWARF, is logged beside it.
func TestServerBinarySize(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary twice")
	}
	t.Parallel()
	goCmd := goTool(t)
	dir := t.TempDir()
	build := func(name string, env []string, args ...string) int64 {
		out := filepath.Join(dir, name)
		cmd := exec.Command(goCmd, append(append([]string{"build", "-o", out}, args...), ".")...)
		cmd.Env = append(os.Environ(), env...)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", strings.Join(args, " "), err, b)
		}
		fi, err := os.Stat(out)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	release := build("release", []string{"CGO_ENABLED=0"}, "-trimpath", "-ldflags=-s -w")
	plain := build("plain", nil)
	t.Logf("release build %.1f MB, plain go build %.1f MB (limit for a release %.1f MB)", float64(release)/1e6, float64(plain)/1e6, float64(releaseSizeLimit)/1e6)
	if release > releaseSizeLimit {
		t.Errorf("the release binary is %d bytes, more than %d: look for a dependency that links more than it is used for (go tool nm -size -sort size)", release, releaseSizeLimit)
	}
	if plain <= release {
		t.Errorf("a plain build (%d bytes) is no larger than a stripped one (%d): the flags did not reach the build", plain, release)
	}
}
