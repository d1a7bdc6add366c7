package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fairq/fairq/internal/testenv"
)

// cli runs the fairq command line with an empty environment and stdin and
// returns its exit code, stdout and stderr.
func cli(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(context.Background(), append([]string{"fairq"}, args...),
		func(string) string { return "" }, strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

// sqsConfig writes a configuration for the SQS emulator with its own queue
// prefix, plus extra YAML, and returns its path and the prefix. The SDK's
// default credential chain reads the environment; the emulator takes any
// key.
func sqsConfig(t *testing.T, extra string) (path, prefix string) {
	t.Helper()
	endpoint := testenv.SQSEndpoint(t)
	prefix = testenv.Prefix(t)
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	path = filepath.Join(t.TempDir(), "fairq.yaml")
	yaml := fmt.Sprintf("backend: sqs\nsqs: {endpoint: %q, queue_prefix: %s}\n%s", endpoint, prefix, extra)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, prefix
}
