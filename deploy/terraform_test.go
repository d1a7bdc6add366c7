package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/fairq/fairq/internal/testenv"
)

// The Terraform module is checked without Terraform: its HCL is parsed and
// the expressions that name and shape the queues, policies and alarms are
// evaluated with HCL's own evaluator and the functions the module uses
// (the subset of Terraform's language the module keeps to), then compared
// with what `fairq queues create` really makes on the SQS emulator and with
// what each role really calls.

// TestTerraformFormat checks that every .tf file is formatted as
// `terraform fmt` would (hclwrite.Format is its formatter).
func TestTerraformFormat(t *testing.T) {
	files, _ := filepath.Glob("terraform/*.tf")
	if len(files) == 0 {
		t.Fatal("no terraform/*.tf")
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if got := hclwrite.Format(src); !bytes.Equal(got, src) {
			t.Errorf("%s is not formatted as terraform fmt would", f)
		}
	}
	// Negative control: a misaligned attribute is reformatted.
	bad := []byte("resource \"x\" \"y\" {\n  a = 1\n  bbb = 2\n}\n")
	if bytes.Equal(hclwrite.Format(bad), bad) {
		t.Error("hclwrite.Format accepted misaligned attributes: the check cannot fail")
	}
}

// TestTerraformQueues creates the queues with `fairq queues create` on the
// emulator, for a prefix and pool size of the test's own, and checks that
// the module declares the same queues with the same attributes and
// redrive policy.
func TestTerraformQueues(t *testing.T) {
	endpoint := testenv.SQSEndpoint(t)
	prefix := testenv.Prefix(t)
	vars := map[string]cty.Value{
		"queue_prefix":               cty.StringVal(prefix),
		"pool_queues":                cty.NumberIntVal(3),
		"visibility_timeout_seconds": cty.NumberIntVal(45),
		"max_message_size":           cty.NumberIntVal(1 << 20),
		"max_retries":                cty.NumberIntVal(4),
	}
	cfg := filepath.Join(t.TempDir(), "fairq.yaml")
	yaml := fmt.Sprintf("backend: sqs\nsqs: {endpoint: %q, queue_prefix: %q}\npool: {queues: 3, shard_size: 2}\n"+
		"worker: {visibility_timeout: 45s, max_retries: 4}\ngateway: {max_message_size: %d}\n", endpoint, prefix, 1<<20)
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	// Built as make builds it (static, -trimpath), so that the image and
	// release tests reuse the compiled packages.
	cmd := exec.CommandContext(t.Context(), "go", "run", "-trimpath", "../cmd/fairq", "queues", "create", "--config", cfg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_REGION="+testenv.SQSRegion)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("fairq queues create: %v\n%s", err, out)
	}
	created := emulatorQueues(t, endpoint, prefix)

	m := loadTerraform(t, "terraform")
	declared := m.eval(t, vars).queues
	if diff := cmp.Diff(created, declared, queueCmp); diff != "" {
		t.Errorf("terraform declares other queues than fairq queues create makes (-created +declared):\n%s", diff)
	}

	// Negative controls: a module that names the live queues otherwise, or
	// variables that differ from fairq's configuration, do not match.
	broken := m.replace(t, `"%s-live-%02d"`, `"%s-live-%d"`)
	if cmp.Equal(created, broken.eval(t, vars).queues, queueCmp) {
		t.Error("a module naming live queues prefix-live-0 still matched: the check cannot fail")
	}
	other := maps.Clone(vars)
	other["max_retries"] = cty.NumberIntVal(5)
	if cmp.Equal(created, m.eval(t, other).queues, queueCmp) {
		t.Error("max_retries 5 against 4 still matched: the check cannot fail")
	}
}

// TestTerraformPolicies checks the module's IAM policies: each role's
// actions are the ones it really calls, on this deployment's queues only,
// its dead-letter actions on the dead-letter queue alone, and with a KMS
// key, the key's actions on that key alone.
func TestTerraformPolicies(t *testing.T) {
	called := roleCalls(t)
	m := loadTerraform(t, "terraform")
	const key = "arn:aws:kms:us-east-1:123456789012:key/0b7c4ad2-1111-2222-3333-444444444444"
	for _, kms := range []bool{false, true} {
		vars := map[string]cty.Value{"queue_prefix": cty.StringVal("acme"), "pool_queues": cty.NumberIntVal(2)}
		if kms {
			vars["kms_key_arn"] = cty.StringVal(key)
		}
		got := m.eval(t, vars)
		t.Run(fmt.Sprintf("kms=%v", kms), func(t *testing.T) {
			if diff := checkPolicies(got, called, kms, key); diff != "" {
				t.Error(diff)
			}
			for name, q := range got.queues {
				if q.sse != !kms || q.kms != (map[bool]string{true: key}[kms]) {
					t.Errorf("queue %s: SSE-SQS %v, KMS key %q; want SSE-SQS %v", name, q.sse, q.kms, !kms)
				}
			}
		})
	}
	// Negative controls: a role that calls one more action than its
	// policy allows is reported, and so is a module that leaves out the
	// gateway's dead-letter statement or puts it on every queue.
	more := maps.Clone(called)
	gw := more["gateway"]
	gw.queues = append(slices.Clone(gw.queues), "sqs:PurgeQueue")
	more["gateway"] = gw
	if checkPolicies(m.eval(t, nil), more, false, "") == "" {
		t.Error("a gateway calling sqs:PurgeQueue passed: the check cannot fail")
	}
	for name, broken := range map[string]*tfModule{
		"no dead-letter statement":    m.replace(t, "length(local.role_dead_letter_actions[each.key]) == 0", "true"),
		"dead letters on every queue": m.replace(t, "Resource = [aws_sqs_queue.dlq.arn]", "Resource = local.queue_arns"),
	} {
		if checkPolicies(broken.eval(t, nil), called, false, "") == "" {
			t.Errorf("a module with %s passed: the check cannot fail", name)
		}
	}
}

// checkPolicies checks the module's policies against what each role
// calls: the statement named by the role's Sid on every queue, the one
// suffixed DeadLetters on the dead-letter queue alone, the one suffixed
// Kms (with a key) on the key alone. It returns the problems found, ""
// for none.
func checkPolicies(got tfResult, called map[string]roleActions, kms bool, key string) string {
	var problems []string
	arns := slices.Sorted(maps.Keys(got.queues))
	for i, name := range arns {
		arns[i] = testARN(name)
	}
	dlq := []string{testARN(got.dlq)}
	if !slices.Equal(slices.Sorted(maps.Keys(got.policies)), slices.Sorted(maps.Keys(called))) {
		problems = append(problems, fmt.Sprintf("policies for %v, roles %v", slices.Sorted(maps.Keys(got.policies)), slices.Sorted(maps.Keys(called))))
	}
	for role, p := range got.policies {
		want := called[role]
		wantKinds := []string{"queues"}
		if len(want.deadLetters) > 0 {
			wantKinds = append(wantKinds, "dead letters")
		}
		if kms {
			wantKinds = append(wantKinds, "kms")
		}
		var kinds []string
		for _, s := range p.Statement {
			res := slices.Sorted(slices.Values(s.Resource))
			acts := slices.Sorted(slices.Values(s.Action))
			if s.Effect != "Allow" {
				problems = append(problems, fmt.Sprintf("%s: statement %s: effect %s, want Allow", role, s.Sid, s.Effect))
			}
			switch {
			case strings.HasSuffix(s.Sid, "DeadLetters"):
				kinds = append(kinds, "dead letters")
				if !slices.Equal(acts, want.deadLetters) || !slices.Equal(res, dlq) {
					problems = append(problems, fmt.Sprintf("%s: statement %s allows %v on %v; the role calls %v on the DLQ %v alone",
						role, s.Sid, acts, res, want.deadLetters, dlq))
				}
			case strings.HasSuffix(s.Sid, "Kms"):
				kinds = append(kinds, "kms")
				if !slices.Equal(res, []string{key}) || len(acts) == 0 || !allPrefixed(acts, "kms:") {
					problems = append(problems, fmt.Sprintf("%s: KMS statement %+v", role, s))
				}
			default:
				kinds = append(kinds, "queues")
				if !slices.Equal(acts, want.queues) || !slices.Equal(res, arns) {
					problems = append(problems, fmt.Sprintf("%s: statement %s allows %v on %v; the role calls %v on the queues %v",
						role, s.Sid, acts, res, want.queues, arns))
				}
			}
		}
		if !slices.Equal(kinds, wantKinds) {
			problems = append(problems, fmt.Sprintf("%s: statements on %v, want %v", role, kinds, wantKinds))
		}
	}
	slices.Sort(problems)
	return strings.Join(problems, "\n")
}

func allPrefixed(ss []string, prefix string) bool {
	for _, s := range ss {
		if !strings.HasPrefix(s, prefix) {
			return false
		}
	}
	return true
}

// TestTerraformAlarms checks that every work queue has an alarm on the age
// of its oldest message and the DLQ one on its depth.
func TestTerraformAlarms(t *testing.T) {
	m := loadTerraform(t, "terraform")
	got := m.eval(t, map[string]cty.Value{"queue_prefix": cty.StringVal("acme"), "pool_queues": cty.NumberIntVal(3)})
	want := map[string]string{"acme-dlq": "ApproximateNumberOfMessagesVisible"}
	for name := range got.queues {
		if name != "acme-dlq" {
			want[name] = "ApproximateAgeOfOldestMessage"
		}
	}
	if diff := cmp.Diff(want, got.alarms); diff != "" {
		t.Errorf("alarms by queue (-want +got):\n%s", diff)
	}
	off := m.eval(t, map[string]cty.Value{"alarms_enabled": cty.False})
	if len(off.alarms) != 0 {
		t.Errorf("alarms_enabled=false still makes %v", off.alarms)
	}
}

// queueCmp compares queues on what both the emulator and the module say.
var queueCmp = cmpopts.IgnoreUnexported(tfQueue{})

// tfQueue is what the tests compare of a queue.
type tfQueue struct {
	Visibility, MaxSize, Retention, Delay int
	DeadLetter                            string // the DLQ's name, "" for none
	MaxReceive                            int
	sse                                   bool   // SSE-SQS, not compared with the emulator
	kms                                   string // KMS key, idem
}

type tfPolicy struct {
	Statement []struct {
		Sid      string
		Effect   string
		Action   []string
		Resource []string
	}
}

// tfResult is what the module makes for a set of variables.
type tfResult struct {
	queues   map[string]tfQueue
	dlq      string // the dead-letter queue's name
	policies map[string]tfPolicy
	alarms   map[string]string // queue name → metric
}

// emulatorQueues reads the attributes of every queue whose name starts
// with prefix from the emulator.
func emulatorQueues(t *testing.T, endpoint, prefix string) map[string]tfQueue {
	t.Helper()
	ctx := t.Context()
	c := sqs.New(sqs.Options{
		Region:       testenv.SQSRegion,
		BaseEndpoint: aws.String(endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
	})
	list, err := c.ListQueues(ctx, &sqs.ListQueuesInput{QueueNamePrefix: aws.String(prefix)})
	if err != nil {
		t.Fatal(err)
	}
	queues := map[string]tfQueue{}
	for _, u := range list.QueueUrls {
		out, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
			QueueUrl: aws.String(u), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll},
		})
		if err != nil {
			t.Fatal(err)
		}
		a := out.Attributes
		q := tfQueue{
			Visibility: atoi(t, a["VisibilityTimeout"]), MaxSize: atoi(t, a["MaximumMessageSize"]),
			Retention: atoi(t, a["MessageRetentionPeriod"]), Delay: atoi(t, a["DelaySeconds"]),
		}
		if rp := a["RedrivePolicy"]; rp != "" {
			q.DeadLetter, q.MaxReceive = parseRedrive(t, rp)
		}
		queues[u[strings.LastIndex(u, "/")+1:]] = q
	}
	return queues
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("attribute %q: %v", s, err)
	}
	return n
}

// parseRedrive reads a RedrivePolicy: the DLQ's name and maxReceiveCount,
// which SQS gives as a number or a string.
func parseRedrive(t *testing.T, s string) (string, int) {
	t.Helper()
	var p struct {
		DeadLetterTargetArn string          `json:"deadLetterTargetArn"`
		MaxReceiveCount     json.RawMessage `json:"maxReceiveCount"`
	}
	if err := json.Unmarshal([]byte(s), &p); err != nil {
		t.Fatalf("RedrivePolicy %s: %v", s, err)
	}
	return p.DeadLetterTargetArn[strings.LastIndex(p.DeadLetterTargetArn, ":")+1:],
		atoi(t, strings.Trim(string(p.MaxReceiveCount), `"`))
}

// testARN is the ARN the evaluation gives a queue.
func testARN(name string) string { return "arn:aws:sqs:us-east-1:123456789012:" + name }

// tfModule is a parsed Terraform module.
type tfModule struct {
	src       map[string][]byte // file name → source
	variables map[string]cty.Value
	locals    map[string]hcl.Expression
	blocks    map[string]*hclsyntax.Block // "aws_sqs_queue.dlq"
}

func loadTerraform(t *testing.T, dir string) *tfModule {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.tf"))
	src := map[string][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src[filepath.Base(f)] = b
	}
	return parseTerraform(t, src)
}

func parseTerraform(t *testing.T, src map[string][]byte) *tfModule {
	t.Helper()
	m := &tfModule{src: src, variables: map[string]cty.Value{}, locals: map[string]hcl.Expression{}, blocks: map[string]*hclsyntax.Block{}}
	for name, b := range src {
		f, diags := hclsyntax.ParseConfig(b, name, hcl.InitialPos)
		if diags.HasErrors() {
			t.Fatalf("%s: %v", name, diags)
		}
		for _, blk := range f.Body.(*hclsyntax.Body).Blocks {
			switch blk.Type {
			case "variable":
				v := cty.NullVal(cty.DynamicPseudoType)
				if a, ok := blk.Body.Attributes["default"]; ok {
					var d hcl.Diagnostics
					if v, d = a.Expr.Value(nil); d.HasErrors() {
						t.Fatalf("%s: variable %s: %v", name, blk.Labels[0], d)
					}
				}
				m.variables[blk.Labels[0]] = v
			case "locals":
				for k, a := range blk.Body.Attributes {
					if _, dup := m.locals[k]; dup {
						t.Fatalf("%s: local %s defined twice", name, k)
					}
					m.locals[k] = a.Expr
				}
			case "resource":
				m.blocks[blk.Labels[0]+"."+blk.Labels[1]] = blk
			}
		}
	}
	return m
}

// replace returns the module with old replaced by new in its sources; the
// replacement must happen.
func (m *tfModule) replace(t *testing.T, old, new string) *tfModule {
	t.Helper()
	src := map[string][]byte{}
	n := 0
	for name, b := range m.src {
		n += bytes.Count(b, []byte(old))
		src[name] = bytes.ReplaceAll(b, []byte(old), []byte(new))
	}
	if n == 0 {
		t.Fatalf("%s not in the module", old)
	}
	return parseTerraform(t, src)
}

// tfFunctions are the Terraform functions the module uses.
var tfFunctions = map[string]function.Function{
	"concat":     stdlib.ConcatFunc,
	"format":     stdlib.FormatFunc,
	"jsonencode": stdlib.JSONEncodeFunc,
	"length":     stdlib.LengthFunc,
	"max":        stdlib.MaxFunc,
	"merge":      stdlib.MergeFunc,
	"min":        stdlib.MinFunc,
	"range":      stdlib.RangeFunc,
	"toset":      stdlib.MakeToFunc(cty.Set(cty.DynamicPseudoType)),
}

// tfEval evaluates a module's expressions for a set of variables.
type tfEval struct {
	m         *tfModule
	vars      map[string]cty.Value
	locals    map[string]cty.Value
	resources map[string]map[string]cty.Value // type → name → value
}

func (e *tfEval) ctx(extra map[string]cty.Value) *hcl.EvalContext {
	vars := map[string]cty.Value{"var": cty.ObjectVal(e.vars), "local": cty.ObjectVal(e.locals)}
	for typ, byName := range e.resources {
		vars[typ] = cty.ObjectVal(byName)
	}
	maps.Copy(vars, extra)
	return &hcl.EvalContext{Variables: vars, Functions: tfFunctions}
}

// resolveLocals evaluates every local it can with what is known so far.
func (e *tfEval) resolveLocals() {
	for progress := true; progress; {
		progress = false
		for name, expr := range e.m.locals {
			if _, done := e.locals[name]; done {
				continue
			}
			if v, d := expr.Value(e.ctx(nil)); !d.HasErrors() && v.IsWhollyKnown() {
				e.locals[name] = v
				progress = true
			}
		}
	}
}

// instances evaluates a resource's attributes for each of its instances
// (for_each, count or one), keyed by each.key, the count index or "".
func (e *tfEval) instances(t *testing.T, addr string) map[string]map[string]cty.Value {
	t.Helper()
	blk := e.m.blocks[addr]
	if blk == nil {
		t.Fatalf("no resource %s", addr)
	}
	each := map[string]map[string]cty.Value{}
	switch {
	case blk.Body.Attributes["for_each"] != nil:
		v := e.value(t, addr, blk.Body.Attributes["for_each"].Expr, nil)
		for it := v.ElementIterator(); it.Next(); {
			k, val := it.Element()
			if v.Type().IsSetType() {
				k = val
			}
			each[k.AsString()] = map[string]cty.Value{"each": cty.ObjectVal(map[string]cty.Value{"key": k, "value": val})}
		}
	case blk.Body.Attributes["count"] != nil:
		n, _ := e.value(t, addr, blk.Body.Attributes["count"].Expr, nil).AsBigFloat().Int64()
		for i := range n {
			each[strconv.FormatInt(i, 10)] = map[string]cty.Value{"count": cty.ObjectVal(map[string]cty.Value{"index": cty.NumberIntVal(i)})}
		}
	default:
		each[""] = nil
	}
	out := map[string]map[string]cty.Value{}
	for key, extra := range each {
		attrs := map[string]cty.Value{}
		for name, a := range blk.Body.Attributes {
			if name == "for_each" || name == "count" || name == "depends_on" {
				continue
			}
			attrs[name] = e.value(t, addr+"."+name, a.Expr, extra)
		}
		out[key] = attrs
	}
	return out
}

func (e *tfEval) value(t *testing.T, what string, expr hcl.Expression, extra map[string]cty.Value) cty.Value {
	t.Helper()
	v, d := expr.Value(e.ctx(extra))
	if d.HasErrors() {
		t.Fatalf("%s: %v", what, d)
	}
	return v
}

// eval evaluates the module with its variables' defaults overridden by
// vars.
func (m *tfModule) eval(t *testing.T, vars map[string]cty.Value) tfResult {
	t.Helper()
	e := &tfEval{m: m, vars: maps.Clone(m.variables), locals: map[string]cty.Value{}, resources: map[string]map[string]cty.Value{}}
	for k, v := range vars {
		if _, ok := e.vars[k]; !ok {
			t.Fatalf("the module has no variable %s", k)
		}
		e.vars[k] = v
	}
	e.resolveLocals()

	// The DLQ first: the work queues' redrive policies name its ARN.
	queueObj := func(attrs map[string]cty.Value) cty.Value {
		o := maps.Clone(attrs)
		name := attrs["name"].AsString()
		o["arn"] = cty.StringVal(testARN(name))
		o["url"] = cty.StringVal("https://sqs.us-east-1.amazonaws.com/123456789012/" + name)
		return cty.ObjectVal(o)
	}
	dlq := e.instances(t, "aws_sqs_queue.dlq")[""]
	e.resources["aws_sqs_queue"] = map[string]cty.Value{"dlq": queueObj(dlq)}
	work := e.instances(t, "aws_sqs_queue.work")
	workObjs := map[string]cty.Value{}
	for k, attrs := range work {
		workObjs[k] = queueObj(attrs)
	}
	e.resources["aws_sqs_queue"]["work"] = cty.ObjectVal(workObjs)
	e.resolveLocals()
	if missing := len(m.locals) - len(e.locals); missing > 0 {
		for name, expr := range m.locals {
			if _, ok := e.locals[name]; !ok {
				e.value(t, "local."+name, expr, nil) // fails with the reason
			}
		}
	}

	res := tfResult{queues: map[string]tfQueue{}, dlq: dlq["name"].AsString(), policies: map[string]tfPolicy{}, alarms: map[string]string{}}
	for _, attrs := range append([]map[string]cty.Value{dlq}, slices.Collect(maps.Values(work))...) {
		q := tfQueue{
			Visibility: ctyInt(attrs["visibility_timeout_seconds"]), MaxSize: ctyInt(attrs["max_message_size"]),
			Retention: ctyInt(attrs["message_retention_seconds"]), Delay: ctyInt(attrs["delay_seconds"]),
			sse: attrs["sqs_managed_sse_enabled"].True(),
		}
		if k := attrs["kms_master_key_id"]; !k.IsNull() {
			q.kms = k.AsString()
		}
		if rp, ok := attrs["redrive_policy"]; ok {
			q.DeadLetter, q.MaxReceive = parseRedrive(t, rp.AsString())
		}
		res.queues[attrs["name"].AsString()] = q
	}
	for role, attrs := range e.instances(t, "aws_iam_policy.role") {
		var p tfPolicy
		if err := json.Unmarshal([]byte(attrs["policy"].AsString()), &p); err != nil {
			t.Fatalf("policy %s: %v", role, err)
		}
		res.policies[role] = p
	}
	for _, addr := range []string{"aws_cloudwatch_metric_alarm.oldest_message_age", "aws_cloudwatch_metric_alarm.dlq_depth"} {
		for _, attrs := range e.instances(t, addr) {
			dims, err := ctyjson.Marshal(attrs["dimensions"], attrs["dimensions"].Type())
			if err != nil {
				t.Fatal(err)
			}
			var d struct{ QueueName string }
			if err := json.Unmarshal(dims, &d); err != nil || attrs["namespace"].AsString() != "AWS/SQS" {
				t.Fatalf("%s: dimensions %s, namespace %v (%v)", addr, dims, attrs["namespace"], err)
			}
			res.alarms[d.QueueName] = attrs["metric_name"].AsString()
		}
	}
	return res
}

// ctyInt returns a number attribute as an int; null is 0.
func ctyInt(v cty.Value) int {
	if v.IsNull() {
		return 0
	}
	n, _ := v.AsBigFloat().Int64()
	return int(n)
}
