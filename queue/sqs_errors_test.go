package queue

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
)

func TestSQSErrorMapsCodes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		code string
		want error // nil: no sentinel
	}{
		{"QueueDoesNotExist", ErrQueueNotFound},
		{"AWS.SimpleQueueService.NonExistentQueue", ErrQueueNotFound},
		{"BatchRequestTooLong", ErrTooLarge},
		{"TooManyEntriesInBatchRequest", ErrTooManyEntries},
		{"EmptyBatchRequest", ErrEmptyBatch},
		{"BatchEntryIdsNotDistinct", ErrInvalidEntry},
		{"InvalidBatchEntryId", ErrInvalidEntry},
		{"ReceiptHandleIsInvalid", ErrReceiptHandle},
		{"ThrottlingException", nil},
	}
	sentinels := []error{ErrQueueNotFound, ErrTooLarge, ErrTooManyEntries, ErrEmptyBatch, ErrInvalidEntry, ErrReceiptHandle}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			api := &smithy.GenericAPIError{Code: tt.code, Message: "m"}
			err := sqsError(fmt.Errorf("operation error: %w", api))
			for _, s := range sentinels {
				if got := errors.Is(err, s); got != (s == tt.want) {
					t.Errorf("errors.Is(%v, %v) = %v, want %v", err, s, got, !got)
				}
			}
			var got smithy.APIError
			if !errors.As(err, &got) || got.ErrorCode() != tt.code {
				t.Errorf("%v lost the service's error", err)
			}
		})
	}
	if err := errors.New("dial tcp: refused"); sqsError(err) != err {
		t.Errorf("an error that is not the service's was changed")
	}
}

func TestSQSEntryError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		code   string
		msg    string
		sender bool
		want   error // nil: no sentinel
	}{
		{"stale handle", "ReceiptHandleIsInvalid", "The input receipt handle is invalid.", true, ErrReceiptHandle},
		{"not in flight", "AWS.SimpleQueueService.MessageNotInflight", "", true, ErrReceiptHandle},
		{"too long", "InvalidParameterValue", "One or more parameters are invalid. Reason: Message must be shorter than 262144 bytes.", true, ErrTooLarge},
		{"bad contents", "InvalidMessageContents", "Invalid characters found.", true, ErrInvalidEntry},
		{"other parameter", "InvalidParameterValue", "Value 50000 for parameter VisibilityTimeout is invalid.", true, ErrInvalidEntry},
		{"service fault", "InternalError", "try again", false, nil},
	}
	sentinels := []error{ErrTooLarge, ErrInvalidEntry, ErrReceiptHandle}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := sqsEntryError(types.BatchResultErrorEntry{
				Id: aws.String("0"), Code: aws.String(tt.code), Message: aws.String(tt.msg), SenderFault: tt.sender,
			})
			if err == nil {
				t.Fatal("no error for a failed entry")
			}
			for _, s := range sentinels {
				if got := errors.Is(err, s); got != (s == tt.want) {
					t.Errorf("errors.Is(%v, %v) = %v, want %v", err, s, got, !got)
				}
			}
		})
	}
}

func TestSQSSameRedrive(t *testing.T) {
	t.Parallel()
	const arn = "arn:aws:sqs:us-east-1:000000000000:fairq-dlq"
	tests := []struct {
		name       string
		have       string
		arn        string
		maxReceive int
		want       bool
	}{
		{"none wanted, none set", "", "", 0, true},
		{"none wanted, one set", `{"deadLetterTargetArn":"` + arn + `","maxReceiveCount":3}`, "", 0, false},
		{"one wanted, none set", "", arn, 3, false},
		{"number", `{"deadLetterTargetArn":"` + arn + `","maxReceiveCount":3}`, arn, 3, true},
		{"string", `{"deadLetterTargetArn":"` + arn + `","maxReceiveCount":"3"}`, arn, 3, true},
		{"other count", `{"deadLetterTargetArn":"` + arn + `","maxReceiveCount":"4"}`, arn, 3, false},
		{"other queue", `{"deadLetterTargetArn":"` + arn + `2","maxReceiveCount":"3"}`, arn, 3, false},
		{"malformed", `{"deadLetterTargetArn":`, arn, 3, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := sqsSameRedrive(tt.have, tt.arn, tt.maxReceive); got != tt.want {
				t.Errorf("sqsSameRedrive(%q, %q, %d) = %v, want %v", tt.have, tt.arn, tt.maxReceive, got, tt.want)
			}
		})
	}
}

func TestSQSSecondsRoundsUp(t *testing.T) {
	t.Parallel()
	tests := []struct {
		d    time.Duration
		want int32
	}{
		{0, 0},
		{time.Nanosecond, 1},
		{time.Second, 1},
		{1500 * time.Millisecond, 2},
		{MaxDelay, 900},
		{MaxVisibility, 43200},
	}
	for _, tt := range tests {
		if got := sqsSeconds(tt.d); got != tt.want {
			t.Errorf("sqsSeconds(%v) = %d, want %d", tt.d, got, tt.want)
		}
	}
}
