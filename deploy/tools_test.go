package deploy

import (
	"go/build"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/fairq/fairq/internal/testenv"
)

// tool returns the path of a command-line tool the deployment checks run:
// on PATH, or in GOPATH/bin where `make deps` installs Go tools. When it is
// missing the test is skipped with a message saying how to install it, or
// fails when FAIRQ_REQUIRE_SERVICES=1 (as in CI).
func tool(t *testing.T, name, install string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, dir := range filepath.SplitList(build.Default.GOPATH) {
		p := filepath.Join(dir, "bin", name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	if os.Getenv(testenv.RequireEnv) == "1" {
		t.Fatalf("%s not found on PATH or in GOPATH/bin; %s (%s=1, so this fails instead of skipping)", name, install, testenv.RequireEnv)
	}
	t.Skipf("skipped: %s not found on PATH or in GOPATH/bin; %s", name, install)
	return ""
}
