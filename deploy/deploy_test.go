package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.yaml.in/yaml/v3"

	"github.com/fairq/fairq/consumer"
	"github.com/fairq/fairq/deploy/iam"
	"github.com/fairq/fairq/fleet"
	"github.com/fairq/fairq/gateway"
	"github.com/fairq/fairq/internal/testenv"
	"github.com/fairq/fairq/queue"
	"github.com/fairq/fairq/schedule"
	"github.com/fairq/fairq/sharding"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// roles maps each role of package iam to the backend interfaces its processes
// use: the methods are read from the interfaces themselves, so a new
// method a role starts to call shows up here without anyone remembering
// the policy.
var roles = map[string][]reflect.Type{
	"gateway": {typeOf[gateway.Backend](), typeOf[sharding.DepthReader]()},
	"worker": {typeOf[consumer.Backend](), typeOf[fleet.DepthReader](), typeOf[schedule.Sender](),
		typeOf[sharding.DepthReader]()}, // dlq redrive picks the shallowest queue
	"admin": {typeOf[queue.Backend]()}, // queues create, dlq redrive
}

func typeOf[T any]() reflect.Type { return reflect.TypeFor[T]() }

// TestIAMPolicies runs every backend method a role uses against the SQS
// emulator, records the SQS operations it calls (fairq_sqs_requests_total)
// and checks that the role's actions in package iam (the one source of the
// policies) allow each, and nothing more, and that the committed JSON
// policies are iam's rendering for the default prefix.
func TestIAMPolicies(t *testing.T) {
	called := roleCalls(t)
	for _, r := range iam.Roles {
		t.Run(r.Name, func(t *testing.T) {
			got := slices.Sorted(slices.Values(r.Actions))
			if want := called[r.Name]; !slices.Equal(got, want) {
				t.Errorf("iam.Roles[%s] allows %v; the role calls %v", r.Name, got, want)
			}
			if got := policyActions(t, filepath.Join("iam", r.Name+".json")); !slices.Equal(got, called[r.Name]) {
				t.Errorf("iam/%s.json allows %v; the role calls %v", r.Name, got, called[r.Name])
			}
		})
	}
	if len(called) != len(iam.Roles) {
		t.Errorf("roles tested %v, iam.Roles has %d", slices.Sorted(maps.Keys(called)), len(iam.Roles))
	}
}

// TestIAMRendering checks that the committed policies and Terraform locals
// are what `go generate ./deploy/iam` writes, and that a policy rendered
// for another prefix allows that prefix's queues and no others.
func TestIAMRendering(t *testing.T) {
	for _, r := range iam.Roles {
		want, err := r.PolicyJSON(iam.PrefixDefault)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("iam", r.Name+".json")
		if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s differs from its rendering (%v): run go generate ./deploy/iam", path, err)
		}
		other, err := r.PolicyJSON("acme")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(other, []byte(`"arn:aws:sqs:*:*:acme-*"`)) || bytes.Contains(other, []byte("fairq-")) {
			t.Errorf("policy %s for prefix acme:\n%s", r.Name, other)
		}
	}
	if got, err := os.ReadFile("terraform/iam.tf"); err != nil || !bytes.Equal(got, iam.Terraform()) {
		t.Errorf("terraform/iam.tf differs from its rendering (%v): run go generate ./deploy/iam", err)
	}
}

var roleCallsOnce struct {
	sync.Mutex
	calls map[string][]string
}

// roleCalls returns the IAM actions each role calls, sorted, measured once
// per test binary against the emulator.
func roleCalls(t *testing.T) map[string][]string {
	t.Helper()
	roleCallsOnce.Lock()
	defer roleCallsOnce.Unlock()
	if roleCallsOnce.calls != nil {
		return roleCallsOnce.calls
	}
	endpoint := testenv.SQSEndpoint(t)
	opsByMethod := map[string][]string{}
	for _, m := range []string{"Send", "Receive", "Delete", "ChangeVisibility", "Depth", "Create"} {
		opsByMethod[m] = sqsOps(t, endpoint, m)
	}
	calls := map[string][]string{}
	for role, ifaces := range roles {
		var want []string
		for _, it := range ifaces {
			for i := range it.NumMethod() {
				ops := opsByMethod[it.Method(i).Name]
				if ops == nil {
					t.Fatalf("%v.%s: no SQS operations known for this method", it, it.Method(i).Name)
				}
				for _, op := range ops {
					want = append(want, iamAction(op))
				}
			}
		}
		slices.Sort(want)
		calls[role] = slices.Compact(want)
	}
	roleCallsOnce.calls = calls
	return calls
}

// iamAction names the IAM action of an SQS API operation: batch calls are
// authorised by their single-message action.
func iamAction(op string) string {
	return "sqs:" + strings.TrimSuffix(op, "Batch")
}

// sqsOps calls one method of queue.SQS on the emulator and returns the
// operations it made.
func sqsOps(t *testing.T, endpoint, method string) []string {
	t.Helper()
	ctx := t.Context()
	reg := prometheus.NewRegistry()
	b, err := queue.NewSQS(ctx, queue.SQSConfig{
		Region:      testenv.SQSRegion,
		Endpoint:    endpoint,
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
		Registerer:  reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	name := testenv.Prefix(t) + "-" + strings.ToLower(method)
	spec := queue.Spec{Name: name, VisibilityTimeout: time.Second}
	// Every method but Create needs an existing queue, made by a backend
	// whose operations are not counted.
	if method != "Create" {
		setup := testenv.SQSBackend(t)
		if _, err := setup.Create(ctx, spec); err != nil {
			t.Fatal(err)
		}
		if _, err := setup.Send(ctx, name, []queue.Entry{{ID: "1", Body: "x"}}); err != nil {
			t.Fatal(err)
		}
	}
	var handle string
	if method == "Delete" || method == "ChangeVisibility" {
		setup := testenv.SQSBackend(t)
		msgs, err := setup.Receive(ctx, name, queue.ReceiveOptions{Max: 1, Wait: 2 * time.Second})
		if err != nil || len(msgs) != 1 {
			t.Fatalf("receive for %s: %v %v", method, msgs, err)
		}
		handle = msgs[0].ReceiptHandle
	}
	switch method {
	case "Send":
		_, err = b.Send(ctx, name, []queue.Entry{{ID: "2", Body: "y"}})
	case "Receive":
		_, err = b.Receive(ctx, name, queue.ReceiveOptions{Max: 1})
	case "Delete":
		_, err = b.Delete(ctx, name, []string{handle})
	case "ChangeVisibility":
		_, err = b.ChangeVisibility(ctx, name, []queue.VisibilityChange{{ReceiptHandle: handle, Timeout: 0}})
	case "Depth":
		_, err = b.Depth(ctx, name)
	case "Create":
		dlq := queue.Spec{Name: name + "-dlq"}
		if _, err = b.Create(ctx, dlq); err == nil {
			spec.DeadLetter, spec.MaxReceiveCount = dlq.Name, 5
			if _, err = b.Create(ctx, spec); err == nil {
				spec.MaxReceiveCount = 6 // an update
				_, err = b.Create(ctx, spec)
			}
		}
	}
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var ops []string
	for _, f := range families {
		if f.GetName() != "fairq_sqs_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			if m.GetCounter().GetValue() > 0 {
				ops = append(ops, label(m, "op"))
			}
		}
	}
	return ops
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func policyActions(t *testing.T, path string) []string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Version   string
		Statement []struct {
			Effect   string
			Action   []string
			Resource string
		}
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var actions []string
	for _, s := range doc.Statement {
		if s.Effect != "Allow" || !strings.HasPrefix(s.Resource, "arn:aws:sqs:") {
			t.Errorf("%s: statement %+v: want Allow on SQS queues", path, s)
		}
		actions = append(actions, s.Action...)
	}
	slices.Sort(actions)
	return slices.Compact(actions)
}

// TestServiceFiles checks that each unit and manifest runs a command the
// binary has, and leaves the process longer to stop than its grace
// periods (HTTP drain, then in-flight jobs) need.
func TestServiceFiles(t *testing.T) {
	const needSeconds = 35 // 10 s HTTP drain + 25 s worker grace, see cmd/fairq
	command := regexp.MustCompile(`fairq (gateway|worker) --config \S+`)
	for _, path := range []string{"systemd/fairq-gateway.service", "systemd/fairq-worker.service"} {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		s := string(raw)
		if !command.MatchString(s) {
			t.Errorf("%s: no ExecStart of fairq gateway|worker --config", path)
		}
		var stop int
		if _, err := fmt.Sscanf(s[strings.Index(s, "TimeoutStopSec=")+len("TimeoutStopSec="):], "%d", &stop); err != nil || stop <= needSeconds {
			t.Errorf("%s: TimeoutStopSec %d (%v), want more than %d", path, stop, err, needSeconds)
		}
	}
	for _, path := range []string{"kubernetes/fairq.yaml"} {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(strings.NewReader(string(raw)))
		var kinds []string
		for {
			var doc struct {
				Kind string
				Spec struct {
					Template struct {
						Spec struct {
							TerminationGracePeriodSeconds int `yaml:"terminationGracePeriodSeconds"`
							Containers                    []struct {
								Name string
								Args []string
							}
						}
					}
				}
			}
			if err := dec.Decode(&doc); err != nil {
				break
			}
			kinds = append(kinds, doc.Kind)
			if doc.Kind != "Deployment" {
				continue
			}
			pod := doc.Spec.Template.Spec
			if pod.TerminationGracePeriodSeconds <= needSeconds {
				t.Errorf("%s: terminationGracePeriodSeconds %d, want more than %d", path, pod.TerminationGracePeriodSeconds, needSeconds)
			}
			var found bool
			for _, c := range pod.Containers {
				if c.Name == "fairq" {
					found = command.MatchString("fairq " + strings.Join(c.Args, " "))
				}
			}
			if !found {
				t.Errorf("%s: no fairq container running gateway|worker --config", path)
			}
		}
		if !slices.Contains(kinds, "Deployment") {
			t.Errorf("%s: no Deployment among %v", path, kinds)
		}
	}
}
