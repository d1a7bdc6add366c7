package queue

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
)

// sqsRedrive is an SQS RedrivePolicy. SQS answers maxReceiveCount as a
// number or a string depending on how it was set, so it is read raw.
type sqsRedrive struct {
	DeadLetterTargetArn string          `json:"deadLetterTargetArn"`
	MaxReceiveCount     json.RawMessage `json:"maxReceiveCount"`
}

// Create creates a queue, or brings an existing queue's attributes to the
// spec; only then does it call SetQueueAttributes. A zero VisibilityTimeout
// means 30 s, a zero MaxMessageSize 256 KiB and a zero Retention 4 days, as
// in Memory; all four attributes are always set, so a queue changed by hand
// is put back. The dead-letter queue must exist already (Names.All lists it
// first).
func (s *SQS) Create(ctx context.Context, spec Spec) (CreateResult, error) {
	if _, err := normalizeSpec(spec); err != nil { // the limits Memory checks too
		return 0, fmt.Errorf("sqs create %q: %w", spec.Name, err)
	}
	want := map[string]string{
		string(types.QueueAttributeNameVisibilityTimeout):      strconv.Itoa(int(sqsSeconds(cmp.Or(spec.VisibilityTimeout, VisibilityTimeoutDefault)))),
		string(types.QueueAttributeNameDelaySeconds):           strconv.Itoa(int(sqsSeconds(spec.Delay))),
		string(types.QueueAttributeNameMaximumMessageSize):     strconv.Itoa(cmp.Or(spec.MaxMessageSize, MaxMessageSizeDefault)),
		string(types.QueueAttributeNameMessageRetentionPeriod): strconv.Itoa(int(sqsSeconds(cmp.Or(spec.Retention, RetentionDefault)))),
	}
	var arn string
	if spec.DeadLetter != "" {
		var err error
		if arn, err = s.queueARN(ctx, spec.DeadLetter); err != nil {
			return 0, fmt.Errorf("sqs create %q: dead-letter queue: %w", spec.Name, err)
		}
		policy, err := json.Marshal(sqsRedrive{
			DeadLetterTargetArn: arn,
			MaxReceiveCount:     json.RawMessage(strconv.Quote(strconv.Itoa(spec.MaxReceiveCount))),
		})
		if err != nil {
			return 0, fmt.Errorf("sqs create %q: %w", spec.Name, err)
		}
		want[string(types.QueueAttributeNameRedrivePolicy)] = string(policy)
	}

	u, err := s.queueURL(ctx, spec.Name)
	if errors.Is(err, ErrQueueNotFound) {
		out, cerr := s.client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(spec.Name), Attributes: want})
		if cerr == nil {
			s.urls.Store(spec.Name, aws.ToString(out.QueueUrl))
			s.log.DebugContext(ctx, "sqs queue created", slog.String("queue", spec.Name))
			return Created, nil
		}
		var api smithy.APIError
		if !errors.As(cerr, &api) || (api.ErrorCode() != "QueueNameExists" && api.ErrorCode() != "QueueAlreadyExists") {
			return 0, s.callErr("create", spec.Name, cerr)
		}
		// Created meanwhile by someone else, with other attributes: update it.
		u, err = s.queueURL(ctx, spec.Name)
	}
	if err != nil {
		return 0, fmt.Errorf("sqs create %q: %w", spec.Name, err)
	}

	out, err := s.client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(u),
		AttributeNames: []types.QueueAttributeName{
			types.QueueAttributeNameVisibilityTimeout,
			types.QueueAttributeNameDelaySeconds,
			types.QueueAttributeNameMaximumMessageSize,
			types.QueueAttributeNameMessageRetentionPeriod,
			types.QueueAttributeNameRedrivePolicy,
		},
	})
	if err != nil {
		return 0, s.callErr("create", spec.Name, err)
	}
	diff := make(map[string]string)
	for k, v := range want {
		if k != string(types.QueueAttributeNameRedrivePolicy) && out.Attributes[k] != v {
			diff[k] = v
		}
	}
	have := out.Attributes[string(types.QueueAttributeNameRedrivePolicy)]
	if !sqsSameRedrive(have, arn, spec.MaxReceiveCount) {
		// An empty RedrivePolicy removes the one the queue has.
		diff[string(types.QueueAttributeNameRedrivePolicy)] = want[string(types.QueueAttributeNameRedrivePolicy)]
	}
	if len(diff) == 0 {
		return Unchanged, nil
	}
	if _, err := s.client.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(u), Attributes: diff}); err != nil {
		return 0, s.callErr("create", spec.Name, err)
	}
	s.log.DebugContext(ctx, "sqs queue updated", slog.String("queue", spec.Name), slog.String("attributes", strings.Join(slices.Sorted(maps.Keys(diff)), ",")))
	return Updated, nil
}

// sqsSameRedrive reports whether a queue's RedrivePolicy (as SQS answers it)
// is the one for arn and maxReceive; an empty arn means no policy.
func sqsSameRedrive(have, arn string, maxReceive int) bool {
	if have == "" || arn == "" {
		return have == "" && arn == ""
	}
	var p sqsRedrive
	if err := json.Unmarshal([]byte(have), &p); err != nil {
		return false
	}
	n, err := strconv.Atoi(strings.Trim(string(p.MaxReceiveCount), `"`))
	return err == nil && p.DeadLetterTargetArn == arn && n == maxReceive
}

// queueARN returns a queue's ARN.
func (s *SQS) queueARN(ctx context.Context, name string) (string, error) {
	u, err := s.queueURL(ctx, name)
	if err != nil {
		return "", err
	}
	out, err := s.client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(u),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn},
	})
	if err != nil {
		return "", s.callErr("get arn", name, err)
	}
	arn := out.Attributes[string(types.QueueAttributeNameQueueArn)]
	if arn == "" {
		return "", fmt.Errorf("sqs get arn %q: answer lacks QueueArn", name)
	}
	return arn, nil
}
