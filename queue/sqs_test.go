package queue_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fairq/fairq/internal/testenv"
	"github.com/fairq/fairq/queue"
	"github.com/fairq/fairq/queue/queuetest"
)

func TestSQSConformance(t *testing.T) {
	t.Parallel()
	// Not Strict: the emulator accepts stale and made-up receipt handles in
	// Delete and keeps a dead-lettered message's receive count (a known gap of the emulator).
	queuetest.Run(t, func(t *testing.T) queue.Backend { return testenv.SQSBackend(t) })
}

// sqsSetup returns an SQS backend on the emulator that counts its requests
// in reg, and a queue name prefix of its own.
func sqsSetup(t *testing.T) (b *queue.SQS, reg *prometheus.Registry, prefix string) {
	t.Helper()
	reg = prometheus.NewRegistry()
	b, err := queue.NewSQS(t.Context(), queue.SQSConfig{
		Region:      "us-east-1",
		Endpoint:    testenv.SQSEndpoint(t),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
		Registerer:  reg,
		HTTPClient:  noKeepAlive(),
	})
	if err != nil {
		t.Fatalf("NewSQS: %v", err)
	}
	return b, reg, testenv.Prefix(t)
}

func noKeepAlive() *awshttp.BuildableClient {
	return awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) { tr.DisableKeepAlives = true })
}

// requests reads fairq_sqs_requests_total by op, leaving out zero series.
func requests(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	got := make(map[string]float64)
	for _, f := range families {
		if f.GetName() != "fairq_sqs_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			if v := m.GetCounter().GetValue(); v != 0 {
				for _, l := range m.GetLabel() {
					if l.GetName() == "op" {
						got[l.GetValue()] = v
					}
				}
			}
		}
	}
	return got
}

// expectRequests checks the requests counted since the last call.
func expectRequests(t *testing.T, reg *prometheus.Registry, before map[string]float64, want map[string]float64) map[string]float64 {
	t.Helper()
	now := requests(t, reg)
	got := make(map[string]float64)
	for op, v := range now {
		if d := v - before[op]; d != 0 {
			got[op] = d
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	return now
}

func TestSQSCountsEachOperation(t *testing.T) {
	t.Parallel()
	b, reg, prefix := sqsSetup(t)
	ctx := t.Context()
	names := queue.PoolNames(prefix, 1)
	seen := requests(t, reg)

	if _, err := b.Create(ctx, queue.Spec{Name: names.DLQ}); err != nil {
		t.Fatal(err)
	}
	seen = expectRequests(t, reg, seen, map[string]float64{"GetQueueUrl": 1, "CreateQueue": 1})

	spec := queue.Spec{Name: names.Live[0], DeadLetter: names.DLQ, MaxReceiveCount: 3}
	if res, err := b.Create(ctx, spec); err != nil || res != queue.Created {
		t.Fatalf("Create = %v, %v; want created", res, err)
	}
	// The dead-letter queue's URL is cached; its ARN is read.
	seen = expectRequests(t, reg, seen, map[string]float64{"GetQueueAttributes": 1, "GetQueueUrl": 1, "CreateQueue": 1})

	if res, err := b.Create(ctx, spec); err != nil || res != queue.Unchanged {
		t.Fatalf("Create again = %v, %v; want unchanged", res, err)
	}
	// ARN of the dead-letter queue, then the attributes to compare: no SetQueueAttributes.
	seen = expectRequests(t, reg, seen, map[string]float64{"GetQueueAttributes": 2})

	q := names.Live[0]
	if _, err := b.Send(ctx, q, []queue.Entry{{ID: "a", Body: "1"}, {ID: "b", Body: "2"}}); err != nil {
		t.Fatal(err)
	}
	seen = expectRequests(t, reg, seen, map[string]float64{"SendMessageBatch": 1})

	msgs, err := b.Receive(ctx, q, queue.ReceiveOptions{Wait: time.Second, Visibility: time.Minute})
	if err != nil || len(msgs) == 0 {
		t.Fatalf("Receive = %d messages, %v", len(msgs), err)
	}
	seen = expectRequests(t, reg, seen, map[string]float64{"ReceiveMessage": 1})

	if errs, err := b.ChangeVisibility(ctx, q, []queue.VisibilityChange{{ReceiptHandle: msgs[0].ReceiptHandle, Timeout: time.Minute}}); err != nil || errs[0] != nil {
		t.Fatalf("ChangeVisibility = %v, %v", errs, err)
	}
	seen = expectRequests(t, reg, seen, map[string]float64{"ChangeMessageVisibilityBatch": 1})

	if errs, err := b.Delete(ctx, q, []string{msgs[0].ReceiptHandle}); err != nil || errs[0] != nil {
		t.Fatalf("Delete = %v, %v", errs, err)
	}
	seen = expectRequests(t, reg, seen, map[string]float64{"DeleteMessageBatch": 1})

	if _, err := b.Depth(ctx, q); err != nil {
		t.Fatal(err)
	}
	seen = expectRequests(t, reg, seen, map[string]float64{"GetQueueAttributes": 1})

	spec.MaxReceiveCount = 5
	if res, err := b.Create(ctx, spec); err != nil || res != queue.Updated {
		t.Fatalf("Create with another MaxReceiveCount = %v, %v; want updated", res, err)
	}
	expectRequests(t, reg, seen, map[string]float64{"GetQueueAttributes": 2, "SetQueueAttributes": 1})
}

// failFirst is a proxy to the emulator that answers the first request with
// a 500, as a struggling SQS might.
func failFirst(t *testing.T) string {
	t.Helper()
	target, err := url.Parse(testenv.SQSEndpoint(t))
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = &http.Transport{DisableKeepAlives: true}
	var failed atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if failed.CompareAndSwap(false, true) {
			w.Header().Set("Content-Type", "application/x-amz-json-1.0")
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, `{"__type":"com.amazonaws.sqs#InternalError","message":"try again"}`)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestSQSCountsRetries(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	b, err := queue.NewSQS(t.Context(), queue.SQSConfig{
		Region:      "us-east-1",
		Endpoint:    failFirst(t),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
		Registerer:  reg,
		HTTPClient:  noKeepAlive(),
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Depth(t.Context(), testenv.Prefix(t)+"-missing")
	if !errors.Is(err, queue.ErrQueueNotFound) {
		t.Fatalf("Depth of a missing queue: err = %v, want %v", err, queue.ErrQueueNotFound)
	}
	// The 500 and the retry that found no queue are both billed.
	expectRequests(t, reg, nil, map[string]float64{"GetQueueUrl": 2})
}

// TestSQSChecksBeforeSending checks that requests SQS would refuse are
// refused without a request.
func TestSQSChecksBeforeSending(t *testing.T) {
	t.Parallel()
	b, reg, prefix := sqsSetup(t)
	ctx := t.Context()
	q := prefix + "-q"
	if _, err := b.Create(ctx, queue.Spec{Name: q}); err != nil {
		t.Fatal(err)
	}
	eleven := make([]queue.Entry, queue.MaxBatch+1)
	for i := range eleven {
		eleven[i] = queue.Entry{ID: fmt.Sprint(i), Body: "x"}
	}
	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"send none", func() error { _, err := b.Send(ctx, q, nil); return err }, queue.ErrEmptyBatch},
		{"send 11", func() error { _, err := b.Send(ctx, q, eleven); return err }, queue.ErrTooManyEntries},
		{"send repeated id", func() error {
			_, err := b.Send(ctx, q, []queue.Entry{{ID: "a", Body: "1"}, {ID: "a", Body: "2"}})
			return err
		}, queue.ErrInvalidEntry},
		{"send bad id", func() error { _, err := b.Send(ctx, q, []queue.Entry{{ID: "a b", Body: "1"}}); return err }, queue.ErrInvalidEntry},
		{"send batch over 1 MiB", func() error {
			half := strings.Repeat("x", queue.MaxMessageSizeCap/2+1)
			_, err := b.Send(ctx, q, []queue.Entry{{ID: "a", Body: half}, {ID: "b", Body: half}})
			return err
		}, queue.ErrTooLarge},
		{"receive 11", func() error { _, err := b.Receive(ctx, q, queue.ReceiveOptions{Max: 11}); return err }, queue.ErrTooManyEntries},
		{"delete none", func() error { _, err := b.Delete(ctx, q, nil); return err }, queue.ErrEmptyBatch},
		{"change visibility none", func() error { _, err := b.ChangeVisibility(ctx, q, nil); return err }, queue.ErrEmptyBatch},
		{"create bad name", func() error { _, err := b.Create(ctx, queue.Spec{Name: "a.b"}); return err }, nil},
		{"create max receive without dead letter", func() error {
			_, err := b.Create(ctx, queue.Spec{Name: q, MaxReceiveCount: 3})
			return err
		}, nil},
	}
	seen := requests(t, reg)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if err == nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("err = %v, want %v", err, describe(tt.want))
			}
		})
	}
	expectRequests(t, reg, seen, map[string]float64{})
}

// describe names the error a case wants: a sentinel, or any.
func describe(want error) any {
	if want == nil {
		return "an error"
	}
	return want
}

// TestSQSEntriesFailAlone checks that entries SQS would refuse fail alone,
// without being sent, while the rest of the batch goes through.
func TestSQSEntriesFailAlone(t *testing.T) {
	t.Parallel()
	b, reg, prefix := sqsSetup(t)
	ctx := t.Context()
	q := prefix + "-q"
	if _, err := b.Create(ctx, queue.Spec{Name: q}); err != nil {
		t.Fatal(err)
	}
	eleven := make(map[string]string)
	for i := range queue.MaxAttributes + 1 {
		eleven[fmt.Sprint("a", i)] = "v"
	}
	entries := []queue.Entry{ // each but the first fails on its own
		{ID: "ok", Body: "fine", Attributes: map[string]string{"fairq-tenant": "acme"}},
		{ID: "empty", Body: ""},
		{ID: "control", Body: "bell\x07"},
		{ID: "badutf8", Body: "\xff"},
		{ID: "attrs", Body: "x", Attributes: eleven},
		{ID: "attrname", Body: "x", Attributes: map[string]string{"AWS.reserved": "v"}},
		{ID: "attrempty", Body: "x", Attributes: map[string]string{"k": ""}},
		{ID: "delay", Body: "x", Delay: queue.MaxDelay + time.Second},
		{ID: "huge", Body: strings.Repeat("x", queue.MaxMessageSizeCap+1)},
	}
	seen := requests(t, reg)
	res, err := b.Send(ctx, q, entries[:len(entries)-1])
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	seen = expectRequests(t, reg, seen, map[string]float64{"SendMessageBatch": 1})
	if res[0].Err != nil || res[0].MessageID == "" {
		t.Errorf("entry %q: %+v, want it sent", res[0].ID, res[0])
	}
	for i, r := range res[1:] {
		if r.ID != entries[i+1].ID {
			t.Errorf("result %d: ID %q, want %q", i+1, r.ID, entries[i+1].ID)
		}
		if !errors.Is(r.Err, queue.ErrInvalidEntry) || r.MessageID != "" {
			t.Errorf("entry %q: %+v, want %v", r.ID, r, queue.ErrInvalidEntry)
		}
	}

	// An entry over the cap makes the batch too long: the call fails, as in SQS.
	if _, err := b.Send(ctx, q, entries[len(entries)-1:]); !errors.Is(err, queue.ErrTooLarge) {
		t.Errorf("Send of an entry over %d bytes: err = %v, want %v", queue.MaxMessageSizeCap, err, queue.ErrTooLarge)
	}
	expectRequests(t, reg, seen, map[string]float64{})

	if d, err := b.Depth(ctx, q); err != nil || d.Visible != 1 {
		t.Errorf("Depth = %+v, %v; want the one valid message", d, err)
	}
}

// TestSQSCreate checks the redrive policy Create sets, compares and removes.
func TestSQSCreate(t *testing.T) {
	t.Parallel()
	b, _, prefix := sqsSetup(t)
	ctx := t.Context()
	dlq, other, q := prefix+"-dlq", prefix+"-dlq2", prefix+"-q"
	for _, name := range []string{dlq, other} {
		if _, err := b.Create(ctx, queue.Spec{Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		name string
		spec queue.Spec
		want queue.CreateResult
	}{
		{"new", queue.Spec{Name: q, DeadLetter: dlq, MaxReceiveCount: 3}, queue.Created},
		{"same", queue.Spec{Name: q, DeadLetter: dlq, MaxReceiveCount: 3}, queue.Unchanged},
		{"other count", queue.Spec{Name: q, DeadLetter: dlq, MaxReceiveCount: 4}, queue.Updated},
		{"other dead-letter queue", queue.Spec{Name: q, DeadLetter: other, MaxReceiveCount: 4}, queue.Updated},
		{"same again", queue.Spec{Name: q, DeadLetter: other, MaxReceiveCount: 4}, queue.Unchanged},
		{"no redrive", queue.Spec{Name: q}, queue.Updated},
		{"still none", queue.Spec{Name: q}, queue.Unchanged},
		{"every attribute", queue.Spec{Name: q, VisibilityTimeout: time.Minute, Delay: 2 * time.Second,
			MaxMessageSize: 2048, Retention: time.Hour}, queue.Updated},
		{"every attribute again", queue.Spec{Name: q, VisibilityTimeout: time.Minute, Delay: 2 * time.Second,
			MaxMessageSize: 2048, Retention: time.Hour}, queue.Unchanged},
		{"defaults", queue.Spec{Name: q}, queue.Updated},
	}
	for _, st := range steps {
		got, err := b.Create(ctx, st.spec)
		if err != nil {
			t.Fatalf("%s: Create: %v", st.name, err)
		}
		if got != st.want {
			t.Errorf("%s: Create = %v, want %v", st.name, got, st.want)
		}
	}
}

// TestSQSQueueRecreated checks that a cached queue URL is dropped when the
// queue is deleted, so that a queue created again under the name is found.
func TestSQSQueueRecreated(t *testing.T) {
	t.Parallel()
	b, _, prefix := sqsSetup(t)
	ctx := t.Context()
	q := prefix + "-q"
	if _, err := b.Create(ctx, queue.Spec{Name: q}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Depth(ctx, q); err != nil {
		t.Fatal(err)
	}
	deleteQueue(t, q)
	if _, err := b.Depth(ctx, q); !errors.Is(err, queue.ErrQueueNotFound) {
		t.Fatalf("Depth of a deleted queue: err = %v, want %v", err, queue.ErrQueueNotFound)
	}
	if res, err := b.Create(ctx, queue.Spec{Name: q}); err != nil || res != queue.Created {
		t.Fatalf("Create again = %v, %v; want created", res, err)
	}
	if _, err := b.Depth(ctx, q); err != nil {
		t.Errorf("Depth of the queue created again: %v", err)
	}
}

// deleteQueue deletes a queue behind the backend's back.
func deleteQueue(t *testing.T, name string) {
	t.Helper()
	client := sqs.New(sqs.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(testenv.SQSEndpoint(t)),
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		HTTPClient:   noKeepAlive(),
	})
	ctx := t.Context()
	out, err := client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl}); err != nil {
		t.Fatal(err)
	}
}

func TestNewSQSConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cfg     queue.SQSConfig
		wantErr bool
	}{
		{"emulator", queue.SQSConfig{Region: "us-east-1", Endpoint: "http://127.0.0.1:4566"}, false},
		{"aws", queue.SQSConfig{Region: "eu-west-1"}, false},
		{"relative endpoint", queue.SQSConfig{Region: "us-east-1", Endpoint: "127.0.0.1:4566"}, true},
		{"other scheme", queue.SQSConfig{Region: "us-east-1", Endpoint: "ftp://127.0.0.1"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Credentials = credentials.NewStaticCredentialsProvider("test", "test", "")
			tt.cfg.HTTPClient = noKeepAlive()
			_, err := queue.NewSQS(context.Background(), tt.cfg)
			if (err != nil) != tt.wantErr {
				t.Errorf("NewSQS(%+v): err = %v, want error %v", tt.cfg, err, tt.wantErr)
			}
		})
	}
}

// TestNewSQSSharesRegistry checks that two backends can count into one
// registry (a gateway and a worker in one process).
func TestNewSQSSharesRegistry(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	for i := range 2 {
		_, err := queue.NewSQS(t.Context(), queue.SQSConfig{
			Region: "us-east-1", Registerer: reg, HTTPClient: noKeepAlive(),
			Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
		})
		if err != nil {
			t.Fatalf("NewSQS %d: %v", i, err)
		}
	}
}
