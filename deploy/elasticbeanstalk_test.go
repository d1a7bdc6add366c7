package deploy

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fairq/fairq/config"
)

const ebPlatform = "elasticbeanstalk/.platform"

// ebScripts are the Elastic Beanstalk drop-in's scripts.
var ebScripts = []string{
	ebPlatform + "/fairq/install.sh",
	ebPlatform + "/hooks/postdeploy/50_fairq_worker.sh",
	ebPlatform + "/confighooks/postdeploy/50_fairq_worker.sh",
}

// TestElasticBeanstalkScripts checks the hook scripts with bash -n and
// shellcheck, and that Elastic Beanstalk can run them.
func TestElasticBeanstalkScripts(t *testing.T) {
	bash := tool(t, "bash", "install bash")
	shellcheck := tool(t, "shellcheck", "install Debian's shellcheck (make deps)")
	for _, s := range ebScripts {
		if fi, err := os.Stat(s); err != nil || fi.Mode()&0o111 == 0 {
			t.Errorf("%s: not executable (%v): Elastic Beanstalk runs hooks only when they are", s, err)
		}
		if out, err := exec.Command(bash, "-n", s).CombinedOutput(); err != nil {
			t.Errorf("bash -n %s: %v\n%s", s, err, out)
		}
		if out, err := exec.Command(shellcheck, "--severity=style", s).CombinedOutput(); err != nil {
			t.Errorf("shellcheck %s: %v\n%s", s, err, out)
		}
	}
	// Negative controls: a syntax error and an unquoted expansion.
	bad := filepath.Join(t.TempDir(), "bad.sh")
	write(t, bad, "#!/bin/bash\nif true; then\n")
	if exec.Command(bash, "-n", bad).Run() == nil {
		t.Error("bash -n passed an unterminated if: the check cannot fail")
	}
	write(t, bad, "#!/bin/bash\ndir=$1\nrm -rf $dir/tmp\n")
	if exec.Command(shellcheck, "--severity=style", bad).Run() == nil {
		t.Error("shellcheck passed an unquoted expansion: the check cannot fail")
	}
	// The unit the hook installs is the repository's sandboxed worker unit.
	got, err1 := os.ReadFile(ebPlatform + "/fairq/fairq-worker.service")
	want, err2 := os.ReadFile("systemd/fairq-worker.service")
	if err1 != nil || err2 != nil || !bytes.Equal(got, want) {
		t.Errorf("%s/fairq/fairq-worker.service differs from systemd/fairq-worker.service (%v, %v): copy it", ebPlatform, err1, err2)
	}
}

// TestElasticBeanstalkConfig runs the hook's translation of an environment's
// aws:elasticbeanstalk:sqsd options and FAIRQ_ properties, and loads the
// result with fairq's own configuration loader, as the worker will.
func TestElasticBeanstalkConfig(t *testing.T) {
	bash := tool(t, "bash", "install bash")
	tool(t, "jq", "install Debian's jq (make deps)")
	options := `{"aws:elasticbeanstalk:sqsd": {
		"WorkerQueueURL": "https://sqs.eu-west-1.amazonaws.com/123456789012/awseb-queue",
		"HttpPath": "/jobs", "MimeType": "application/x-www-form-urlencoded",
		"HttpConnections": "25", "ConnectTimeout": "3", "InactivityTimeout": "299",
		"VisibilityTimeout": "600", "ErrorVisibilityTimeout": "120",
		"RetentionPeriod": "345600", "MaxRetries": "7"},
		"aws:elasticbeanstalk:application:environment": {"FAIRQ_REDIS_ADDR": "redis.internal:6379"}}`
	const password = "p\"w\\d $x `y`" // what systemd would unquote or expand
	environment := `{"FAIRQ_REDIS_ADDR": "redis.internal:6379", "FAIRQ_REDIS_PASSWORD": ` + strconv.Quote(password) + `,
		"FAIRQ_SQS_REGION": "eu-west-1", "DATABASE_URL": "postgres://app"}`
	cfg, err := ebConfig(t, bash, options, environment)
	if err != nil {
		t.Fatal(err)
	}
	w := cfg.Worker
	got := map[string]any{
		"push_url": w.PushURL, "mime_type": w.MimeType, "connections": w.Connections,
		"connect_timeout": w.ConnectTimeout, "inactivity_timeout": w.InactivityTimeout,
		"visibility_timeout": w.VisibilityTimeout, "error_visibility_timeout": w.ErrorVisibilityTimeout,
		"max_retries": w.MaxRetries, "redis.addr": cfg.Redis.Addr, "redis.password": cfg.Redis.Password,
		"sqs.region": cfg.SQS.Region,
	}
	want := map[string]any{
		"push_url": "http://127.0.0.1:80/jobs", "mime_type": "application/x-www-form-urlencoded", "connections": 25,
		"connect_timeout": 3 * time.Second, "inactivity_timeout": 299 * time.Second,
		"visibility_timeout": 600 * time.Second, "error_visibility_timeout": 120 * time.Second,
		"max_retries": 7, "redis.addr": "redis.internal:6379", "redis.password": password,
		"sqs.region": "eu-west-1",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("fairq's configuration from the Elastic Beanstalk options (-want +got):\n%s", diff)
	}

	// With no sqsd options set, aws-sqsd's defaults are fairq's.
	cfg, err = ebConfig(t, bash, `{}`, `{}`)
	if err != nil {
		t.Fatal(err)
	}
	def := config.Default().Worker
	if cfg.Worker.PushURL != "http://127.0.0.1:80/" || cfg.Worker.Connections != def.Connections || cfg.Worker.MaxRetries != def.MaxRetries {
		t.Errorf("without options: worker %+v", cfg.Worker)
	}

	// Negative controls: the loader rejects a connection count aws-sqsd
	// would reject too, and the hook a timeout that is not seconds.
	if _, err := ebConfig(t, bash, `{"aws:elasticbeanstalk:sqsd": {"HttpConnections": "500"}}`, `{}`); err == nil || !strings.Contains(err.Error(), "worker.connections") {
		t.Errorf("HttpConnections 500: %v, want fairq to reject worker.connections", err)
	}
	if _, err := ebConfig(t, bash, `{"aws:elasticbeanstalk:sqsd": {"ConnectTimeout": "5s"}}`, `{}`); err == nil || !strings.Contains(err.Error(), "not a number of seconds") {
		t.Errorf("ConnectTimeout 5s: %v, want the hook to refuse it", err)
	}
}

// ebConfig runs the hook's --env-only step on the given get-config
// answers and loads fairq's configuration from the hook's fairq.yaml with
// the environment file it wrote.
func ebConfig(t *testing.T, bash, options, environment string) (config.Config, error) {
	t.Helper()
	dir := t.TempDir()
	opts, env, out := filepath.Join(dir, "options.json"), filepath.Join(dir, "environment.json"), filepath.Join(dir, "fairq.env")
	write(t, opts, options)
	write(t, env, environment)
	cmd := exec.CommandContext(t.Context(), bash, ebPlatform+"/fairq/install.sh", "--env-only", out)
	cmd.Env = append(os.Environ(), "FAIRQ_EB_OPTIONSETTINGS="+opts, "FAIRQ_EB_ENVIRONMENT="+env)
	if b, err := cmd.CombinedOutput(); err != nil {
		return config.Config{}, &hookError{err: err, out: string(b)}
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	vars := parseEnvironmentFile(t, string(raw))
	return config.Load(ebPlatform+"/fairq/fairq.yaml", func(k string) string { return vars[k] })
}

type hookError struct {
	err error
	out string
}

func (e *hookError) Error() string { return "install.sh --env-only: " + e.err.Error() + ": " + e.out }

// parseEnvironmentFile reads the subset of systemd's EnvironmentFile syntax
// the hook writes: comments, and KEY="value" with \" and \\ escaped.
func parseEnvironmentFile(t *testing.T, s string) map[string]string {
	t.Helper()
	vars := map[string]string{}
	for line := range strings.Lines(s) {
		line = strings.TrimRight(line, "\n")
		if line == "" || line[0] == '#' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
			t.Fatalf("environment file line %q: want KEY=\"value\"", line)
		}
		var b strings.Builder
		for i := 1; i < len(v)-1; i++ {
			if v[i] == '\\' && i+1 < len(v)-1 {
				i++
			}
			b.WriteByte(v[i])
		}
		vars[k] = b.String()
	}
	return vars
}
