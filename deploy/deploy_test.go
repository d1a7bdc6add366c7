package deploy

import (
	"bytes"
	"context"
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
	"github.com/fairq/fairq/deadletter"
	"github.com/fairq/fairq/deploy/iam"
	"github.com/fairq/fairq/fleet"
	"github.com/fairq/fairq/gateway"
	"github.com/fairq/fairq/internal/testenv"
	"github.com/fairq/fairq/queue"
	"github.com/fairq/fairq/queue/queuetest"
	"github.com/fairq/fairq/schedule"
	"github.com/fairq/fairq/sharding"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// roles maps each role of package iam to the backend interfaces its
// processes use: the methods are read from the interfaces themselves, so a
// new method a role starts to call shows up here without anyone
// remembering the policy.
var roles = map[string]roleUse{
	"gateway": {
		queues: []reflect.Type{typeOf[gateway.Backend](), typeOf[sharding.DepthReader]()},
		// The admin API's peek, purge and redrive of dead letters.
		deadLetters: []reflect.Type{typeOf[deadletter.Backend]()},
	},
	"worker": {queues: []reflect.Type{typeOf[consumer.Backend](), typeOf[fleet.DepthReader](), typeOf[schedule.Sender](),
		typeOf[sharding.DepthReader]()}}, // dlq redrive picks the shallowest queue
	"admin": {queues: []reflect.Type{typeOf[queue.Backend]()}}, // queues create, dlq redrive
}

// roleUse is what a role's processes use of the queue backend.
type roleUse struct {
	// queues are used on any queue of the deployment.
	queues []reflect.Type
	// deadLetters are used by the dead-letter tools: on the dead-letter
	// queue, and to send back to the live queues.
	deadLetters []reflect.Type
}

// roleActions are the IAM actions a role calls, each sorted.
type roleActions struct {
	// queues are called on any queue of the deployment.
	queues []string
	// deadLetters are called by the dead-letter tools and not among
	// queues: the calls on the dead-letter queue alone (a redrive's sends
	// to the live queues are among queues in every role that redrives,
	// which TestIAMDeadLetterScope checks).
	deadLetters []string
}

func typeOf[T any]() reflect.Type { return reflect.TypeFor[T]() }

// TestIAMPolicies runs every backend method a role uses against the SQS
// emulator, records the SQS operations it calls (fairq_sqs_requests_total)
// and checks that the role's actions in package iam (the one source of the
// policies) allow each, and nothing more: on every queue what the role
// calls on any queue, on the dead-letter queue alone what its dead-letter
// tools call besides. The committed JSON policies must say the same.
func TestIAMPolicies(t *testing.T) {
	called := roleCalls(t)
	for _, r := range iam.Roles {
		t.Run(r.Name, func(t *testing.T) {
			want := called[r.Name]
			if got := slices.Sorted(slices.Values(r.Actions)); !slices.Equal(got, want.queues) {
				t.Errorf("iam.Roles[%s].Actions allows %v; the role calls %v on every queue", r.Name, got, want.queues)
			}
			if got := slices.Sorted(slices.Values(r.DeadLetterActions)); !slices.Equal(got, want.deadLetters) {
				t.Errorf("iam.Roles[%s].DeadLetterActions allows %v; the role calls %v on the dead-letter queue alone", r.Name, got, want.deadLetters)
			}
			path := filepath.Join("iam", r.Name+".json")
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if problems := checkPolicyJSON(raw, iam.PrefixDefault, want); problems != "" {
				t.Errorf("%s:\n%s", path, problems)
			}
		})
	}
	if len(called) != len(iam.Roles) {
		t.Errorf("roles tested %v, iam.Roles has %d", slices.Sorted(maps.Keys(called)), len(iam.Roles))
	}

	// Negative controls: a gateway policy without its dead-letter
	// statement, or with it on every queue, is reported.
	gw := iam.Roles[slices.IndexFunc(iam.Roles, func(r iam.Role) bool { return r.Name == "gateway" })]
	for name, edit := range map[string]func(*iam.Policy){
		"no dead-letter statement": func(p *iam.Policy) { p.Statement = p.Statement[:1] },
		"dead letters on every queue": func(p *iam.Policy) {
			p.Statement[1].Resource = "arn:aws:sqs:*:*:" + iam.PrefixDefault + "-*"
		},
	} {
		p := gw.Policy(iam.PrefixDefault)
		if len(p.Statement) != 2 {
			t.Fatalf("gateway policy has %d statements, want 2", len(p.Statement))
		}
		edit(&p)
		raw, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		if checkPolicyJSON(raw, iam.PrefixDefault, called["gateway"]) == "" {
			t.Errorf("a gateway policy with %s passed: the check cannot fail", name)
		}
	}
}

// TestIAMDeadLetterScope runs the dead-letter tools as the gateway's admin
// API does (a peek, a redrive, a purge) on the emulator, records the queue
// each backend call addresses, and checks that the gateway's policy,
// rendered for the test's queue prefix, allows every call on its queue:
// the dead-letter statement covers the DLQ alone, so a tool that received,
// deleted or hid messages on any other queue would be denied. It also
// checks that the policy allows the dead-letter actions on no live queue.
func TestIAMDeadLetterScope(t *testing.T) {
	byMethod := methodActions(t)
	ctx := t.Context()
	b, names := queuetest.Pool(t, "sqs")
	prefix := strings.TrimSuffix(names.DLQ, "-dlq")
	tracker, err := sharding.NewTracker(sharding.Config{Reader: b, Queues: names.Live, ShardSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recordingBackend{b: b, calls: map[queueCall]bool{}}
	dq, err := deadletter.New(deadletter.Config{Backend: rec, Names: names, Picker: tracker})
	if err != nil {
		t.Fatal(err)
	}
	for _, tenant := range []string{"a", "b"} {
		queuetest.Put(t, b, names.DLQ, queuetest.Msg{Tenant: tenant})
	}
	// A peek of a tenant without dead letters passes over both and makes
	// them visible again; the redrive of a's sends it back and passes over
	// b's; the purge deletes b's.
	if _, err := dq.Peek(ctx, deadletter.Selection{Tenant: "nobody", Max: 1}, false); err != nil {
		t.Fatalf("peek: %v", err)
	}
	if res, err := dq.Redrive(ctx, deadletter.Selection{Tenant: "a"}); err != nil || res.Moved != 1 {
		t.Fatalf("redrive: %+v, %v; want 1 moved", res, err)
	}
	if res, err := dq.Purge(ctx, deadletter.Selection{}); err != nil || res.Deleted != 1 {
		t.Fatalf("purge: %+v, %v; want 1 deleted", res, err)
	}
	calls := slices.SortedFunc(maps.Keys(rec.calls), func(x, y queueCall) int {
		return strings.Compare(x.method+" "+x.queue, y.method+" "+y.queue)
	})
	var seen []string
	for _, c := range calls {
		where := "live"
		if c.queue == names.DLQ {
			where = "dlq"
		} else if !slices.Contains(names.Live, c.queue) {
			where = c.queue
		}
		seen = append(seen, c.method+" "+where)
	}
	slices.Sort(seen)
	if want := []string{"ChangeVisibility dlq", "Delete dlq", "Receive dlq", "Send live"}; !slices.Equal(slices.Compact(seen), want) {
		t.Fatalf("the dead-letter tools made the calls %v; want %v", slices.Compact(seen), want)
	}

	gw := iam.Roles[slices.IndexFunc(iam.Roles, func(r iam.Role) bool { return r.Name == "gateway" })]
	raw, err := gw.PolicyJSON(prefix)
	if err != nil {
		t.Fatal(err)
	}
	var policy iam.Policy
	if err := json.Unmarshal(raw, &policy); err != nil {
		t.Fatal(err)
	}
	denied := func(p iam.Policy) []string {
		var out []string
		for _, c := range calls {
			for _, action := range byMethod[c.method] {
				if !allows(p, action, testARN(c.queue)) {
					out = append(out, action+" on "+c.queue)
				}
			}
		}
		return out
	}
	if d := denied(policy); len(d) > 0 {
		t.Errorf("the gateway's policy for prefix %s denies %v", prefix, d)
	}
	for _, action := range roleCalls(t)["gateway"].deadLetters {
		if allows(policy, action, testARN(names.Live[0])) {
			t.Errorf("the gateway's policy allows %s on the live queue %s", action, names.Live[0])
		}
	}

	// Negative control: without its dead-letter statement, the policy
	// denies the tools' calls on the DLQ.
	policy.Statement = policy.Statement[:1]
	if len(denied(policy)) == 0 {
		t.Error("a gateway policy without its dead-letter statement allowed every call: the check cannot fail")
	}
}

// queueCall is a backend method called on a queue.
type queueCall struct{ method, queue string }

// recordingBackend is a queue backend (the emulator's), recording the queue each call of
// the dead-letter tools addresses.
type recordingBackend struct {
	b     queue.Backend
	mu    sync.Mutex
	calls map[queueCall]bool
}

var _ deadletter.Backend = (*recordingBackend)(nil)

func (r *recordingBackend) record(method, q string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls[queueCall{method, q}] = true
}

func (r *recordingBackend) Send(ctx context.Context, q string, entries []queue.Entry) ([]queue.SendResult, error) {
	r.record("Send", q)
	return r.b.Send(ctx, q, entries)
}

func (r *recordingBackend) Receive(ctx context.Context, q string, opts queue.ReceiveOptions) ([]queue.Message, error) {
	r.record("Receive", q)
	return r.b.Receive(ctx, q, opts)
}

func (r *recordingBackend) Delete(ctx context.Context, q string, handles []string) ([]error, error) {
	r.record("Delete", q)
	return r.b.Delete(ctx, q, handles)
}

func (r *recordingBackend) ChangeVisibility(ctx context.Context, q string, changes []queue.VisibilityChange) ([]error, error) {
	r.record("ChangeVisibility", q)
	return r.b.ChangeVisibility(ctx, q, changes)
}

// allows reports whether a statement of the policy allows action on the
// resource arn. In an IAM Resource, * matches any run of characters and ?
// any one.
func allows(p iam.Policy, action, arn string) bool {
	for _, s := range p.Statement {
		pattern := strings.NewReplacer(`\*`, ".*", `\?`, ".").Replace(regexp.QuoteMeta(s.Resource))
		if s.Effect == "Allow" && slices.Contains(s.Action, action) && regexp.MustCompile("^"+pattern+"$").MatchString(arn) {
			return true
		}
	}
	return false
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

var measured struct {
	sync.Mutex
	byMethod map[string][]string // backend method → IAM actions
	roles    map[string]roleActions
}

// methodActions returns the IAM actions each method of the queue backend
// calls, measured once per test binary against the emulator.
func methodActions(t *testing.T) map[string][]string {
	t.Helper()
	measured.Lock()
	defer measured.Unlock()
	if measured.byMethod != nil {
		return measured.byMethod
	}
	endpoint := testenv.SQSEndpoint(t)
	byMethod := map[string][]string{}
	for _, m := range []string{"Send", "Receive", "Delete", "ChangeVisibility", "Depth", "Create"} {
		var actions []string
		for _, op := range sqsOps(t, endpoint, m) {
			actions = append(actions, iamAction(op))
		}
		slices.Sort(actions)
		byMethod[m] = slices.Compact(actions)
	}
	measured.byMethod = byMethod
	return byMethod
}

// roleCalls returns the IAM actions each role calls.
func roleCalls(t *testing.T) map[string]roleActions {
	t.Helper()
	byMethod := methodActions(t)
	measured.Lock()
	defer measured.Unlock()
	if measured.roles != nil {
		return measured.roles
	}
	actions := func(ifaces []reflect.Type) []string {
		var all []string
		for _, it := range ifaces {
			for i := range it.NumMethod() {
				acts := byMethod[it.Method(i).Name]
				if acts == nil {
					t.Fatalf("%v.%s: no SQS operations known for this method", it, it.Method(i).Name)
				}
				all = append(all, acts...)
			}
		}
		slices.Sort(all)
		return slices.Compact(all)
	}
	calls := map[string]roleActions{}
	for role, use := range roles {
		queues := actions(use.queues)
		var dead []string
		for _, a := range actions(use.deadLetters) {
			if !slices.Contains(queues, a) {
				dead = append(dead, a)
			}
		}
		calls[role] = roleActions{queues: queues, deadLetters: dead}
	}
	measured.roles = calls
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

// checkPolicyJSON checks a role's JSON policy for the queues of prefix:
// one statement allowing the actions called on every queue on all of the
// prefix's queues and, if the role calls any, one allowing the
// dead-letter actions on the prefix's dead-letter queue alone. It returns
// the problems found, "" for none.
func checkPolicyJSON(raw []byte, prefix string, want roleActions) string {
	var doc struct {
		Version   string
		Statement []struct {
			Sid      string
			Effect   string
			Action   []string
			Resource string
		}
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return err.Error()
	}
	queues, dlq := "arn:aws:sqs:*:*:"+prefix+"-*", "arn:aws:sqs:*:*:"+prefix+"-dlq"
	wantByResource := map[string][]string{queues: want.queues}
	if len(want.deadLetters) > 0 {
		wantByResource[dlq] = want.deadLetters
	}
	var problems []string
	if doc.Version != "2012-10-17" {
		problems = append(problems, fmt.Sprintf("version %q", doc.Version))
	}
	got := map[string][]string{}
	for _, s := range doc.Statement {
		if s.Effect != "Allow" {
			problems = append(problems, fmt.Sprintf("statement %s: effect %s, want Allow", s.Sid, s.Effect))
		}
		if _, dup := got[s.Resource]; dup {
			problems = append(problems, fmt.Sprintf("statement %s: a second statement on %s", s.Sid, s.Resource))
		}
		got[s.Resource] = slices.Sorted(slices.Values(s.Action))
	}
	for res, acts := range got {
		if w, ok := wantByResource[res]; !ok {
			problems = append(problems, fmt.Sprintf("allows %v on %s, which the role does not need", acts, res))
		} else if !slices.Equal(acts, w) {
			problems = append(problems, fmt.Sprintf("allows %v on %s; the role calls %v there", acts, res, w))
		}
	}
	for res, w := range wantByResource {
		if _, ok := got[res]; !ok {
			problems = append(problems, fmt.Sprintf("no statement on %s; the role calls %v there", res, w))
		}
	}
	slices.Sort(problems)
	return strings.Join(problems, "\n")
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
