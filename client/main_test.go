package client_test

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fairq/fairq/tenant"
)

// fairqBin is the fairq binary the tests run, built once by TestMain.
var fairqBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fairq-client-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fairqBin = filepath.Join(dir, "fairq")
	build := exec.Command("go", "build", "-o", fairqBin, "./cmd/fairq")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build ./cmd/fairq: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	stopDevs()
	os.RemoveAll(dir)
	os.Exit(code)
}

// dev is a running `fairq dev` process.
type dev struct {
	base string // http://127.0.0.1:port
	key  string // the API key of its tenant
	cmd  *exec.Cmd
	done chan struct{} // closed when its stderr is drained
	log  *strings.Builder
	mu   sync.Mutex
}

var (
	devsMu sync.Mutex
	devs   = map[string]*dev{} // by configuration
)

var (
	listenLine = regexp.MustCompile(`msg="fairq dev is up" listen=(\S+)`)
	demoKey    = regexp.MustCompile(`api key for tenant demo: (\S+)`)
)

// demo returns a `fairq dev` with no configuration: the demo tenant, with
// the default limits, whose key it prints on stderr.
func demo(t testing.TB) *dev { return startDev(t, "", "") }

// trickleKey is the API key of the trickle tenant.
var trickleKey = "fq_test_" + randomHex(16)

// trickle returns a `fairq dev` whose one tenant, "trickle", is admitted
// one message a second with no burst.
func trickle(t testing.TB) *dev {
	config := fmt.Sprintf("tenants:\n  - id: trickle\n    api_keys: [%q]\n    ingest_rate: 1\n    ingest_burst: 1\n", tenant.HashKey(trickleKey))
	return startDev(t, config, trickleKey)
}

// startDev starts `fairq dev --listen 127.0.0.1:0` with config (none when
// empty), once per configuration for the test binary, and returns it when
// it serves. key is the tenant's key, or "" to read the demo key from
// stderr.
func startDev(t testing.TB, config, key string) *dev {
	t.Helper()
	devsMu.Lock()
	defer devsMu.Unlock()
	if d, ok := devs[config]; ok {
		if d.base == "" {
			t.Fatalf("fairq dev did not start earlier; its log:\n%s", d.logText())
		}
		return d
	}
	d := &dev{key: key, done: make(chan struct{}), log: &strings.Builder{}}
	devs[config] = d
	args := []string{"dev", "--listen", "127.0.0.1:0"}
	if config != "" {
		path := filepath.Join(filepath.Dir(fairqBin), "fairq-"+randomHex(4)+".yaml")
		if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--config", path)
	}
	d.cmd = exec.Command(fairqBin, args...)
	stderr, err := d.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	up := make(chan struct{})
	go d.read(stderr, up)
	select {
	case <-up:
	case <-d.done:
		t.Fatalf("fairq dev exited before serving; its log:\n%s", d.logText())
	case <-time.After(30 * time.Second):
		t.Fatalf("fairq dev did not serve within 30s; its log:\n%s", d.logText())
	}
	return d
}

// read keeps the process's stderr, closing up once it knows the address
// and the key.
func (d *dev) read(r io.Reader, up chan<- struct{}) {
	defer close(d.done)
	sc := bufio.NewScanner(r)
	signalled := false
	for sc.Scan() {
		line := sc.Text()
		d.mu.Lock()
		d.log.WriteString(line + "\n")
		if m := listenLine.FindStringSubmatch(line); m != nil {
			d.base = "http://" + m[1]
		}
		if m := demoKey.FindStringSubmatch(line); m != nil && d.key == "" {
			d.key = m[1]
		}
		ready := d.base != "" && d.key != ""
		d.mu.Unlock()
		if ready && !signalled {
			signalled = true
			close(up)
		}
	}
}

func (d *dev) logText() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.log.String()
}

// stopDevs stops every process with SIGTERM, as an operator would, and
// kills one that has not exited within 10 s.
func stopDevs() {
	devsMu.Lock()
	defer devsMu.Unlock()
	for _, d := range devs {
		if d.cmd.Process == nil {
			continue
		}
		d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.done:
		case <-time.After(10 * time.Second):
			d.cmd.Process.Kill()
			<-d.done
		}
		d.cmd.Wait()
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
