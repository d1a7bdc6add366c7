package queue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go/logging"
	"github.com/aws/smithy-go/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/singleflight"
)

// SQSConfig configures an SQS backend.
type SQSConfig struct {
	// Region is the AWS region. Empty takes the region from the SDK's default
	// chain (AWS_REGION, the shared config file); NewSQS fails if none is found.
	Region string
	// Endpoint is the base URL of the SQS API, for emulators and VPC
	// endpoints ("http://127.0.0.1:4566"). Empty uses AWS's endpoint for
	// the region. Queue URLs returned by the service are never used to
	// address it: emulators return URLs with hosts of their own.
	Endpoint string
	// Credentials signs requests; nil uses the SDK's default chain
	// (environment, shared files, instance and container roles).
	Credentials aws.CredentialsProvider
	// Registerer receives the fairq_sqs_requests_total counter; nil keeps it
	// in a private registry.
	Registerer prometheus.Registerer
	// Logger logs queue creation and updates at debug level; nil discards.
	Logger *slog.Logger
	// HTTPClient sends the requests; nil uses the SDK's default client. It
	// must allow a response to take longer than MaxWait (long polls). Pass
	// an *awshttp.BuildableClient rather than an *http.Client when the SDK
	// must adjust the transport (AWS_CA_BUNDLE, for one).
	HTTPClient aws.HTTPClient
}

func (c SQSConfig) withDefaults() SQSConfig {
	c.Logger = cmp.Or(c.Logger, slog.New(slog.DiscardHandler))
	if c.Registerer == nil {
		c.Registerer = prometheus.NewRegistry()
	}
	return c
}

func (c SQSConfig) validate() error {
	if c.Endpoint != "" {
		u, err := url.Parse(c.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("sqs endpoint %q: want an absolute http or https URL", c.Endpoint)
		}
	}
	return nil
}

// sqsOps are the SQS operations SQS calls, pre-registered in the request
// counter so that their series exist from the start.
var sqsOps = []string{
	"SendMessageBatch", "ReceiveMessage", "DeleteMessageBatch",
	"ChangeMessageVisibilityBatch", "GetQueueAttributes", "GetQueueUrl",
	"CreateQueue", "SetQueueAttributes",
}

// SQS is the Backend on Amazon SQS, or on an emulator speaking its JSON
// protocol. It is safe for concurrent use.
//
// Choices where the Backend contract leaves room:
//   - Queues are addressed by name; each URL is looked up once with
//     GetQueueUrl and cached, and forgotten when SQS says the queue does not
//     exist, so that a queue created again is found.
//   - Requests are checked as SQS would check them before they are sent
//     (batch sizes, entry ids, bodies, attributes, delays, the 1 MiB cap),
//     with the helpers Memory uses, so that both backends fail alike and a
//     bad entry costs no request. Entries over a queue's own, smaller
//     MaximumMessageSize are refused by SQS and come back as ErrTooLarge.
//   - Durations are sent in whole seconds, rounded up, so that a delay,
//     wait or visibility timeout is never shorter than asked.
//   - Entry.Delay 0 and ReceiveOptions.Visibility 0 leave the queue's
//     default in force, as in Memory.
//   - Failed entries map to ErrReceiptHandle (invalid handle, message not in
//     flight), ErrTooLarge, or ErrInvalidEntry for any other fault of the
//     sender; a fault of the service is returned as is, worth a retry.
//   - Every HTTP attempt counts in fairq_sqs_requests_total{op}, retries
//     included, because SQS bills each one.
//   - Entry.GroupID is sent as MessageGroupId, which on a standard queue
//     turns on SQS fair queues; the queues are never FIFO.
type SQS struct {
	client   *sqs.Client
	log      *slog.Logger
	requests *prometheus.CounterVec

	urls     sync.Map // queue name → URL
	urlGroup singleflight.Group
}

var _ Backend = (*SQS)(nil)

// NewSQS returns an SQS backend. It loads the SDK's configuration but makes
// no request.
func NewSQS(ctx context.Context, cfg SQSConfig) (*SQS, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}

	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fairq_sqs_requests_total",
		Help: "SQS API requests sent, by operation; every HTTP attempt counts, retries included, since each is billed.",
	}, []string{"op"})
	if err := cfg.Registerer.Register(requests); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			return nil, fmt.Errorf("register sqs metrics: %w", err)
		}
		existing, ok := are.ExistingCollector.(*prometheus.CounterVec)
		if !ok {
			return nil, fmt.Errorf("register sqs metrics: %w", err)
		}
		requests = existing
	}
	for _, op := range sqsOps {
		requests.WithLabelValues(op)
	}

	opts := []func(*config.LoadOptions) error{
		// The SDK's own log lines (rare warnings) as slog records.
		config.WithLogger(sdkLogger{cfg.Logger}),
		// The standard retryer: at most 3 attempts per call (retry.DefaultMaxAttempts),
		// exponential backoff with jitter up to 20 s, and a client-wide retry
		// token bucket so that an outage does not multiply the request rate.
		config.WithRetryer(func() aws.Retryer { return retry.NewStandard() }),
	}
	if cfg.Region != "" {
		opts = append(opts, config.WithRegion(cfg.Region))
	}
	if cfg.Credentials != nil {
		opts = append(opts, config.WithCredentialsProvider(cfg.Credentials))
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, config.WithHTTPClient(cfg.HTTPClient))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("load aws config: %w", err)
	}
	if awsCfg.Region == "" {
		return nil, errors.New("sqs: no region configured")
	}

	client := sqs.NewFromConfig(awsCfg, func(o *sqs.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.APIOptions = append(o.APIOptions, sqsCountAttempts(requests))
	})
	return &SQS{client: client, log: cfg.Logger, requests: requests}, nil
}

// sdkLogger writes the AWS SDK's log lines to a slog.Logger.
type sdkLogger struct{ l *slog.Logger }

func (s sdkLogger) Logf(c logging.Classification, format string, v ...any) {
	level := slog.LevelDebug
	if c == logging.Warn {
		level = slog.LevelWarn
	}
	s.l.Log(context.Background(), level, fmt.Sprintf(format, v...), "component", "aws-sdk")
}

// sqsCountAttempts adds a Finalize middleware right after the retry
// middleware, so that it runs once per HTTP attempt.
func sqsCountAttempts(requests *prometheus.CounterVec) func(*middleware.Stack) error {
	return func(stack *middleware.Stack) error {
		count := middleware.FinalizeMiddlewareFunc("fairqCountAttempts",
			func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
				requests.WithLabelValues(middleware.GetOperationName(ctx)).Inc()
				return next.HandleFinalize(ctx, in)
			})
		return stack.Finalize.Insert(count, "Retry", middleware.After)
	}
}

// queueURL returns the URL of a queue by name, from the cache or GetQueueUrl.
// Concurrent lookups of one name share a single request.
func (s *SQS) queueURL(ctx context.Context, name string) (string, error) {
	if u, ok := s.urls.Load(name); ok {
		return u.(string), nil
	}
	v, err, shared := s.urlGroup.Do(name, func() (any, error) { return s.lookupURL(ctx, name) })
	if err != nil && shared && ctx.Err() == nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		// The caller whose request was shared gave up; this one has not.
		v, err = s.lookupURL(ctx, name)
	}
	if err != nil {
		return "", sqsError(err)
	}
	return v.(string), nil
}

func (s *SQS) lookupURL(ctx context.Context, name string) (string, error) {
	out, err := s.client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
	if err != nil {
		return "", err
	}
	u := aws.ToString(out.QueueUrl)
	s.urls.Store(name, u)
	return u, nil
}

// callErr wraps the error of a whole call and forgets a queue's URL when the
// queue no longer exists, so that a recreated queue is found again.
func (s *SQS) callErr(op, queue string, err error) error {
	err = sqsError(err)
	if errors.Is(err, ErrQueueNotFound) {
		s.urls.Delete(queue)
	}
	return fmt.Errorf("sqs %s %q: %w", op, queue, err)
}

// Send sends up to MaxBatch messages with SendMessageBatch. Entries that fail
// the checks SQS would make are reported in their results without being sent.
func (s *SQS) Send(ctx context.Context, queue string, entries []Entry) ([]SendResult, error) {
	if err := checkBatch(len(entries)); err != nil {
		return nil, fmt.Errorf("sqs send %q: %w", queue, err)
	}
	if err := sqsCheckIDs(entries); err != nil {
		return nil, fmt.Errorf("sqs send %q: %w", queue, err)
	}
	total := 0
	for _, e := range entries {
		total += Size(e.Body, e.Attributes)
	}
	if total > MaxMessageSizeCap {
		return nil, fmt.Errorf("sqs send %q: batch of %d bytes, at most %d: %w", queue, total, MaxMessageSizeCap, ErrTooLarge)
	}
	results := make([]SendResult, len(entries))
	index := make(map[string]int, len(entries))
	var batch []types.SendMessageBatchRequestEntry
	for i, e := range entries {
		results[i].ID = e.ID
		if err := checkEntry(e, MaxMessageSizeCap); err != nil {
			results[i].Err = err
			continue
		}
		index[e.ID] = i
		entry := types.SendMessageBatchRequestEntry{
			Id:                aws.String(e.ID),
			MessageBody:       aws.String(e.Body),
			DelaySeconds:      sqsSeconds(e.Delay),
			MessageAttributes: sqsAttributes(e.Attributes),
		}
		if e.GroupID != "" {
			// On a standard queue a group id turns on fair queues; it
			// never makes the queue FIFO.
			entry.MessageGroupId = aws.String(e.GroupID)
		}
		batch = append(batch, entry)
	}
	if len(batch) == 0 {
		return results, nil
	}
	u, err := s.queueURL(ctx, queue)
	if err != nil {
		return nil, fmt.Errorf("sqs send %q: %w", queue, err)
	}
	out, err := s.client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(u), Entries: batch})
	if err != nil {
		return nil, s.callErr("send", queue, err)
	}
	answered := make(map[string]bool, len(batch))
	for _, ok := range out.Successful {
		id := aws.ToString(ok.Id)
		if i, found := index[id]; found {
			results[i].MessageID = aws.ToString(ok.MessageId)
			answered[id] = true
		}
	}
	for _, f := range out.Failed {
		id := aws.ToString(f.Id)
		if i, found := index[id]; found {
			results[i].Err = sqsEntryError(f)
			answered[id] = true
		}
	}
	for id, i := range index {
		if !answered[id] {
			results[i].Err = fmt.Errorf("sqs send %q: no result for entry %q", queue, id)
		}
	}
	return results, nil
}

// Receive receives up to opts.Max messages with ReceiveMessage, waiting up to
// opts.Wait for the first one.
func (s *SQS) Receive(ctx context.Context, queue string, opts ReceiveOptions) ([]Message, error) {
	if err := sqsCheckReceive(opts); err != nil {
		return nil, fmt.Errorf("sqs receive %q: %w", queue, err)
	}
	u, err := s.queueURL(ctx, queue)
	if err != nil {
		return nil, fmt.Errorf("sqs receive %q: %w", queue, err)
	}
	out, err := s.client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(u),
		MaxNumberOfMessages:         int32(cmp.Or(opts.Max, MaxBatch)),
		WaitTimeSeconds:             sqsSeconds(opts.Wait),
		VisibilityTimeout:           sqsSeconds(opts.Visibility), // 0 is not sent: the queue's default applies
		MessageAttributeNames:       []string{"All"},
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
	})
	if err != nil {
		return nil, s.callErr("receive", queue, err)
	}
	msgs := make([]Message, 0, len(out.Messages))
	for _, m := range out.Messages {
		msg := Message{
			ID:              aws.ToString(m.MessageId),
			ReceiptHandle:   aws.ToString(m.ReceiptHandle),
			Body:            aws.ToString(m.Body),
			SentAt:          sqsMillis(m.Attributes[string(types.MessageSystemAttributeNameSentTimestamp)]),
			FirstReceivedAt: sqsMillis(m.Attributes[string(types.MessageSystemAttributeNameApproximateFirstReceiveTimestamp)]),
			GroupID:         m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)],
		}
		msg.ReceiveCount, _ = strconv.Atoi(m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
		if len(m.MessageAttributes) > 0 {
			msg.Attributes = make(map[string]string, len(m.MessageAttributes))
			for k, v := range m.MessageAttributes {
				if v.StringValue != nil { // String and Number types; Binary has none
					msg.Attributes[k] = *v.StringValue
				}
			}
		}
		msgs = append(msgs, msg)
	}
	return msgs, nil
}

// Delete deletes received messages with DeleteMessageBatch.
func (s *SQS) Delete(ctx context.Context, queue string, handles []string) ([]error, error) {
	if err := checkBatch(len(handles)); err != nil {
		return nil, fmt.Errorf("sqs delete %q: %w", queue, err)
	}
	errs := make([]error, len(handles))
	var batch []types.DeleteMessageBatchRequestEntry
	for i, h := range handles {
		if h == "" {
			errs[i] = fmt.Errorf("empty receipt handle: %w", ErrReceiptHandle)
			continue
		}
		batch = append(batch, types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(h)})
	}
	if len(batch) == 0 {
		return errs, nil
	}
	u, err := s.queueURL(ctx, queue)
	if err != nil {
		return nil, fmt.Errorf("sqs delete %q: %w", queue, err)
	}
	out, err := s.client.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(u), Entries: batch})
	if err != nil {
		return nil, s.callErr("delete", queue, err)
	}
	var successful []*string
	for _, ok := range out.Successful {
		successful = append(successful, ok.Id)
	}
	sqsBatchOutcome("delete", queue, errs, batch, func(e types.DeleteMessageBatchRequestEntry) *string { return e.Id }, successful, out.Failed)
	return errs, nil
}

// ChangeVisibility changes visibility timeouts with ChangeMessageVisibilityBatch.
func (s *SQS) ChangeVisibility(ctx context.Context, queue string, changes []VisibilityChange) ([]error, error) {
	if err := checkBatch(len(changes)); err != nil {
		return nil, fmt.Errorf("sqs change visibility %q: %w", queue, err)
	}
	errs := make([]error, len(changes))
	var batch []types.ChangeMessageVisibilityBatchRequestEntry
	for i, c := range changes {
		switch {
		case c.ReceiptHandle == "":
			errs[i] = fmt.Errorf("empty receipt handle: %w", ErrReceiptHandle)
			continue
		case c.Timeout < 0 || c.Timeout > MaxVisibility:
			errs[i] = fmt.Errorf("visibility timeout %v out of range 0–%v: %w", c.Timeout, MaxVisibility, ErrInvalidEntry)
			continue
		}
		batch = append(batch, types.ChangeMessageVisibilityBatchRequestEntry{
			Id:                aws.String(strconv.Itoa(i)),
			ReceiptHandle:     aws.String(c.ReceiptHandle),
			VisibilityTimeout: sqsSeconds(c.Timeout),
		})
	}
	if len(batch) == 0 {
		return errs, nil
	}
	u, err := s.queueURL(ctx, queue)
	if err != nil {
		return nil, fmt.Errorf("sqs change visibility %q: %w", queue, err)
	}
	out, err := s.client.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(u), Entries: batch})
	if err != nil {
		return nil, s.callErr("change visibility", queue, err)
	}
	var successful []*string
	for _, ok := range out.Successful {
		successful = append(successful, ok.Id)
	}
	sqsBatchOutcome("change visibility", queue, errs, batch, func(e types.ChangeMessageVisibilityBatchRequestEntry) *string { return e.Id }, successful, out.Failed)
	return errs, nil
}

// sqsBatchOutcome fills errs (indexed by the entry ids, which are the
// positions in the caller's slice) from a batch answer; an entry the answer
// does not mention gets an error too.
func sqsBatchOutcome[E any](op, queue string, errs []error, batch []E, id func(E) *string, successful []*string, failed []types.BatchResultErrorEntry) {
	answered := make(map[string]bool, len(batch))
	for _, ok := range successful {
		answered[aws.ToString(ok)] = true
	}
	for _, f := range failed {
		i, err := strconv.Atoi(aws.ToString(f.Id))
		if err != nil || i < 0 || i >= len(errs) {
			continue
		}
		errs[i] = sqsEntryError(f)
		answered[aws.ToString(f.Id)] = true
	}
	for _, e := range batch {
		key := aws.ToString(id(e))
		if !answered[key] {
			i, _ := strconv.Atoi(key)
			errs[i] = fmt.Errorf("sqs %s %q: no result for entry %d", op, queue, i)
		}
	}
}

// Depth reads a queue's approximate counts with GetQueueAttributes.
func (s *SQS) Depth(ctx context.Context, queue string) (Depth, error) {
	u, err := s.queueURL(ctx, queue)
	if err != nil {
		return Depth{}, fmt.Errorf("sqs depth %q: %w", queue, err)
	}
	out, err := s.client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(u),
		AttributeNames: []types.QueueAttributeName{
			types.QueueAttributeNameApproximateNumberOfMessages,
			types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
			types.QueueAttributeNameApproximateNumberOfMessagesDelayed,
		},
	})
	if err != nil {
		return Depth{}, s.callErr("depth", queue, err)
	}
	var d Depth
	for name, dst := range map[types.QueueAttributeName]*int{
		types.QueueAttributeNameApproximateNumberOfMessages:           &d.Visible,
		types.QueueAttributeNameApproximateNumberOfMessagesNotVisible: &d.NotVisible,
		types.QueueAttributeNameApproximateNumberOfMessagesDelayed:    &d.Delayed,
	} {
		v, ok := out.Attributes[string(name)]
		if !ok {
			return Depth{}, fmt.Errorf("sqs depth %q: answer lacks %s", queue, name)
		}
		if *dst, err = strconv.Atoi(v); err != nil {
			return Depth{}, fmt.Errorf("sqs depth %q: %s: %w", queue, name, err)
		}
	}
	return d, nil
}

// sqsSeconds converts a duration to the whole seconds SQS takes, rounding
// up, so that a delay or wait is never shorter than asked.
func sqsSeconds(d time.Duration) int32 {
	return int32((d + time.Second - 1) / time.Second)
}

// sqsMillis parses an SQS timestamp attribute (unix milliseconds); the zero
// time when absent or malformed.
func sqsMillis(v string) time.Time {
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// sqsAttributes converts attributes to String-typed message attributes.
func sqsAttributes(attrs map[string]string) map[string]types.MessageAttributeValue {
	if len(attrs) == 0 {
		return nil
	}
	out := make(map[string]types.MessageAttributeValue, len(attrs))
	for k, v := range attrs {
		out[k] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
	}
	return out
}
