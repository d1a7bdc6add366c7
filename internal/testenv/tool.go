package testenv

import (
	"go/build"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Tool returns the path of a command-line tool a test runs (promtool,
// oapi-codegen...): from PATH, or from the directory where `go install`
// puts commands ($GOBIN, else $GOPATH/bin), which need not be on PATH.
// When it is missing, the test is skipped, or fails when
// FAIRQ_REQUIRE_SERVICES=1; install says how to get it.
func Tool(t testing.TB, name, install string) string {
	t.Helper()
	if path, err := exec.LookPath(name); err == nil {
		return path
	}
	dirs := []string{os.Getenv("GOBIN")}
	for _, gopath := range filepath.SplitList(build.Default.GOPATH) {
		dirs = append(dirs, filepath.Join(gopath, "bin"))
	}
	for _, dir := range dirs {
		if dir == "" {
			continue
		}
		path := filepath.Join(dir, name)
		if fi, err := os.Stat(path); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return path
		}
	}
	err := &missingError{what: name + " is not on PATH nor in the go install directory", how: install}
	if os.Getenv(RequireEnv) == "1" {
		t.Fatalf("testenv: %v (%s=1, so this fails instead of skipping)", err, RequireEnv)
	}
	t.Skipf("testenv: skipped: %v", err)
	return ""
}
