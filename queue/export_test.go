package queue

import (
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"
)

// AddSQSMiddleware adds middleware to the SDK client of s, for tests that
// look at the requests the SDK serialises.
func AddSQSMiddleware(s *SQS, fns ...func(*middleware.Stack) error) {
	s.client = sqs.New(s.client.Options(), func(o *sqs.Options) {
		o.APIOptions = append(o.APIOptions, fns...)
	})
}
