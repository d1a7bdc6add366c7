# One policy per role (gateway, worker, admin) on this deployment's queues
# only, with the actions of iam.tf; a role's dead-letter actions (the
# gateway's dead-letter tools) are allowed on the DLQ alone. Attach each to
# the role its processes run under (an instance profile, an IRSA or Pod
# Identity role, a task role). With a KMS key, each role may also use the
# key as SQS needs it.

resource "aws_iam_policy" "role" {
  for_each = local.role_sqs_actions

  name        = "${var.queue_prefix}-${each.key}"
  description = "fairq ${each.key}: the SQS calls it makes on the ${var.queue_prefix}-* queues"
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = concat([{
      Sid      = local.role_sids[each.key]
      Effect   = "Allow"
      Action   = each.value
      Resource = local.queue_arns
      }], length(local.role_dead_letter_actions[each.key]) == 0 ? [] : [{
      Sid      = "${local.role_sids[each.key]}DeadLetters"
      Effect   = "Allow"
      Action   = local.role_dead_letter_actions[each.key]
      Resource = [aws_sqs_queue.dlq.arn]
      }], local.sse_sqs ? [] : [{
      Sid      = "${local.role_sids[each.key]}Kms"
      Effect   = "Allow"
      Action   = local.role_kms_actions[each.key]
      Resource = [var.kms_key_arn]
    }])
  })

  tags = var.tags
}
