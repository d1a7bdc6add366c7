package testenv

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fairq/fairq/queue"
)

// SQSRegion is the region SQSBackend uses.
const SQSRegion = "us-east-1"

// SQSEndpoint returns the base URL ("http://127.0.0.1:PORT") of a fauxqs
// SQS emulator, started on first use for the whole test binary. Tests share
// it: prefix every queue name with Prefix(t).
func SQSEndpoint(t testing.TB) string {
	t.Helper()
	return sqsService.get(t)
}

// SQSBackend returns a queue.SQS pointed at the emulator, with static test
// credentials, region us-east-1, a registry of its own for its metrics and
// an HTTP client that keeps no idle connections.
func SQSBackend(t testing.TB) *queue.SQS {
	t.Helper()
	endpoint := SQSEndpoint(t)
	// No keep-alive: no idle connection, with its goroutines, outlives the
	// test (goleak), and the SDK's client still takes its transport options.
	client := awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		tr.DisableKeepAlives = true
	})
	b, err := queue.NewSQS(context.Background(), queue.SQSConfig{
		Region:      SQSRegion,
		Endpoint:    endpoint,
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
		Registerer:  prometheus.NewRegistry(),
		Logger:      slog.New(slog.DiscardHandler),
		HTTPClient:  client,
	})
	if err != nil {
		t.Fatalf("testenv: sqs backend: %v", err)
	}
	return b
}

func startFauxqs() (string, *process, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", nil, err
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return "", nil, &missingError{
			what: "node is not on PATH (the SQS emulator fauxqs runs on Node.js)",
			how:  fmt.Sprintf("install Node.js 20 or later, then run `npm ci` in %s, or run `make test`, which does both", root),
		}
	}
	if _, err := os.Stat(filepath.Join(root, "node_modules", "fauxqs", "package.json")); err != nil {
		return "", nil, &missingError{
			what: fmt.Sprintf("the SQS emulator fauxqs is not installed in %s", filepath.Join(root, "node_modules")),
			how:  fmt.Sprintf("run `npm ci` in %s, or `make test`, which does", root),
		}
	}
	script := filepath.Join(root, "internal", "testenv", "fauxqs.mjs")
	if _, err := os.Stat(script); err != nil {
		return "", nil, fmt.Errorf("launcher: %w", err)
	}

	first := newFirstLine()
	p, err := startProcess("fauxqs", root, first, true, node, script)
	if err != nil {
		return "", nil, err
	}
	endpoint, err := waitFauxqs(p, first)
	if err != nil {
		p.stop()
		return "", nil, err
	}
	return endpoint, p, nil
}

// waitFauxqs reads the address the launcher prints and waits until the
// emulator answers GET /health with 200.
func waitFauxqs(p *process, first *firstLine) (string, error) {
	expire := time.NewTimer(startTimeout)
	defer expire.Stop()
	var endpoint string
	select {
	case line := <-first.line:
		u, err := url.Parse(line)
		if err != nil || u.Scheme != "http" || u.Hostname() != "127.0.0.1" || u.Port() == "" {
			return "", fmt.Errorf("fauxqs launcher printed %q, want http://127.0.0.1:PORT; its output ends:\n%s", line, p.out)
		}
		endpoint = u.Scheme + "://" + u.Host
	case <-p.done:
		return "", p.exited()
	case <-expire.C:
		return "", fmt.Errorf("fauxqs printed no address within %v; its output ends:\n%s", startTimeout, p.out)
	}

	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		err := health(client, endpoint)
		if err == nil {
			return endpoint, nil
		}
		select {
		case <-p.done:
			return "", p.exited()
		case <-expire.C:
			return "", fmt.Errorf("fauxqs at %s not healthy after %v (%v); its output ends:\n%s", endpoint, startTimeout, err, p.out)
		case <-tick.C:
		}
	}
}

func health(client *http.Client, endpoint string) error {
	resp, err := client.Get(endpoint + "/health")
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /health: %s", resp.Status)
	}
	return nil
}
