// Package iam is the one source of fairq's least-privilege IAM policies:
// the SQS actions each role calls on the deployment's queues and, for a
// role that runs the dead-letter tools, on the dead-letter queue alone.
// The JSON policies beside this file and
// the Terraform module's deploy/terraform/iam.tf are rendered from it by
// `go generate ./deploy/iam` (the render command, which also renders the
// policies for another queue prefix); the deploy package's tests check
// that the roles call exactly these actions against the SQS emulator and
// that the rendered files have not drifted.
package iam

//go:generate go run ./render -dir . -terraform ../terraform/iam.tf

import (
	"encoding/json"
	"fmt"
	"slices"
)

// Role is one of fairq's roles and the SQS actions its processes call.
type Role struct {
	// Name is the role: gateway, worker or admin.
	Name string
	// Sid names the policy's statement.
	Sid string
	// What says which processes run under the role.
	What string
	// Actions are the SQS actions the role calls, on the deployment's
	// queues only.
	Actions []string
	// DeadLetterActions are the SQS actions the role calls on the
	// dead-letter queue and on no other queue, beyond Actions: a second
	// statement, <Sid>DeadLetters, allows them on that queue alone.
	DeadLetterActions []string
}

// Roles are fairq's roles, in the order the files list them.
var Roles = []Role{
	{
		Name: "gateway",
		Sid:  "FairqGateway",
		What: "fairq gateway: sends messages, reads queue depths, and peeks at, purges and redrives dead letters",
		Actions: []string{
			"sqs:GetQueueUrl",
			"sqs:GetQueueAttributes",
			"sqs:SendMessage",
		},
		// The admin API's dead-letter tools receive, delete and hide dead
		// letters; a redrive sends them back with SendMessage on the live
		// queues, which Actions allows.
		DeadLetterActions: []string{
			"sqs:ReceiveMessage",
			"sqs:DeleteMessage",
			"sqs:ChangeMessageVisibility",
		},
	},
	{
		Name: "worker",
		Sid:  "FairqWorker",
		What: "fairq worker: receives, moves, heartbeats and deletes messages",
		Actions: []string{
			"sqs:GetQueueUrl",
			"sqs:GetQueueAttributes",
			"sqs:ReceiveMessage",
			"sqs:DeleteMessage",
			"sqs:ChangeMessageVisibility",
			"sqs:SendMessage",
		},
	},
	{
		Name: "admin",
		Sid:  "FairqQueuesCreateAndRedrive",
		What: "fairq queues create and fairq dlq redrive",
		Actions: []string{
			"sqs:CreateQueue",
			"sqs:GetQueueUrl",
			"sqs:GetQueueAttributes",
			"sqs:SetQueueAttributes",
			"sqs:ReceiveMessage",
			"sqs:DeleteMessage",
			"sqs:ChangeMessageVisibility",
			"sqs:SendMessage",
		},
	},
}

// PrefixDefault is the queue prefix of the committed JSON policies, the
// default of sqs.queue_prefix.
const PrefixDefault = "fairq"

// Resource is the ARN pattern of a deployment's queues: every queue name
// starts with the prefix and a dash, in any region and account.
func Resource(prefix string) string {
	return "arn:aws:sqs:*:*:" + prefix + "-*"
}

// DeadLetterResource is the ARN pattern of a deployment's dead-letter
// queue, <prefix>-dlq, in any region and account.
func DeadLetterResource(prefix string) string {
	return "arn:aws:sqs:*:*:" + prefix + "-dlq"
}

// DeadLetterSid names the statement of a role's DeadLetterActions.
func (r Role) DeadLetterSid() string { return r.Sid + "DeadLetters" }

// KMSActions are the KMS actions the role needs on the key of queues
// encrypted with a customer managed key (SSE-KMS): a producer generates
// data keys and decrypts them, a consumer decrypts. None is needed with
// SQS-managed encryption (SSE-SQS). The dead-letter queue shares the
// deployment's key, so its actions count as the others do.
func (r Role) KMSActions() []string {
	all := slices.Concat(r.Actions, r.DeadLetterActions)
	var kms []string
	if slices.Contains(all, "sqs:SendMessage") {
		kms = append(kms, "kms:GenerateDataKey")
	}
	if slices.Contains(all, "sqs:SendMessage") || slices.Contains(all, "sqs:ReceiveMessage") {
		kms = append(kms, "kms:Decrypt")
	}
	return kms
}

// Policy is an IAM policy document.
type Policy struct {
	Version   string
	Statement []Statement
}

// Statement is one statement of a Policy.
type Statement struct {
	Sid      string
	Effect   string
	Action   []string
	Resource string
}

// Policy returns the role's policy for the queues of prefix: its Actions
// on every queue and, if it has any, its DeadLetterActions on the
// dead-letter queue.
func (r Role) Policy(prefix string) Policy {
	p := Policy{
		Version: "2012-10-17",
		Statement: []Statement{{
			Sid:      r.Sid,
			Effect:   "Allow",
			Action:   slices.Clone(r.Actions),
			Resource: Resource(prefix),
		}},
	}
	if len(r.DeadLetterActions) > 0 {
		p.Statement = append(p.Statement, Statement{
			Sid:      r.DeadLetterSid(),
			Effect:   "Allow",
			Action:   slices.Clone(r.DeadLetterActions),
			Resource: DeadLetterResource(prefix),
		})
	}
	return p
}

// PolicyJSON returns the role's policy for prefix as the committed files
// have it: indented by two spaces, with a final newline.
func (r Role) PolicyJSON(prefix string) ([]byte, error) {
	b, err := json.MarshalIndent(r.Policy(prefix), "", "  ")
	if err != nil {
		return nil, fmt.Errorf("policy %s: %w", r.Name, err)
	}
	return append(b, '\n'), nil
}
