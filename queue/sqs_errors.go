package queue

import (
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
)

// sqsError maps the error of a whole SQS call to the package's sentinels,
// keeping the service's error in the chain.
func sqsError(err error) error {
	var api smithy.APIError
	if !errors.As(err, &api) {
		return err
	}
	var sentinel error
	switch api.ErrorCode() {
	case "QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue":
		sentinel = ErrQueueNotFound
	case "BatchRequestTooLong", "AWS.SimpleQueueService.BatchRequestTooLong":
		sentinel = ErrTooLarge
	case "TooManyEntriesInBatchRequest", "AWS.SimpleQueueService.TooManyEntriesInBatchRequest":
		sentinel = ErrTooManyEntries
	case "EmptyBatchRequest", "AWS.SimpleQueueService.EmptyBatchRequest":
		sentinel = ErrEmptyBatch
	case "InvalidBatchEntryId", "AWS.SimpleQueueService.InvalidBatchEntryId",
		"BatchEntryIdsNotDistinct", "AWS.SimpleQueueService.BatchEntryIdsNotDistinct":
		sentinel = ErrInvalidEntry
	case "ReceiptHandleIsInvalid", "MessageNotInflight", "AWS.SimpleQueueService.MessageNotInflight":
		sentinel = ErrReceiptHandle
	}
	if sentinel == nil {
		return err
	}
	return fmt.Errorf("%w: %w", sentinel, err)
}

// sqsEntryError maps a failed batch entry to the package's sentinels: an
// invalid or expired receipt handle is ErrReceiptHandle, a message over the
// queue's size limit ErrTooLarge, any other fault of the sender
// ErrInvalidEntry. A fault of the service is returned as is (worth a retry).
func sqsEntryError(f types.BatchResultErrorEntry) error {
	code, msg := aws.ToString(f.Code), aws.ToString(f.Message)
	err := fmt.Errorf("%s: %s", code, msg)
	switch {
	case code == "ReceiptHandleIsInvalid" || code == "MessageNotInflight" ||
		code == "AWS.SimpleQueueService.MessageNotInflight":
		return fmt.Errorf("%w: %w", ErrReceiptHandle, err)
	case code == "InvalidParameterValue" && sqsSaysTooLong(msg):
		return fmt.Errorf("%w: %w", ErrTooLarge, err)
	case f.SenderFault:
		return fmt.Errorf("%w: %w", ErrInvalidEntry, err)
	}
	return err
}

// sqsSaysTooLong recognises SQS's message for a body over the queue's
// MaximumMessageSize ("Message must be shorter than 262144 bytes").
func sqsSaysTooLong(msg string) bool {
	msg = strings.ToLower(msg)
	return strings.Contains(msg, "shorter than") || strings.Contains(msg, "too long")
}
