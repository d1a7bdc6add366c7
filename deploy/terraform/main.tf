# fairq's queues, as `fairq queues create` makes them: the live pool, the
# overflow and backlog queues, each with a RedrivePolicy to the DLQ.
# Queues are keyed by name, so growing the pool adds queues and changes
# none of the others.

locals {
  live_names    = [for i in range(var.pool_queues) : format("%s-live-%02d", var.queue_prefix, i)]
  overflow_name = "${var.queue_prefix}-overflow"
  backlog_name  = "${var.queue_prefix}-backlog"
  dlq_name      = "${var.queue_prefix}-dlq"
  work_names    = concat(local.live_names, [local.overflow_name, local.backlog_name])

  # The sizes and counts fairq's queues create derives from its configuration.
  max_message_size  = max(var.max_message_size, 262144)
  max_receive_count = min(max(2 * var.max_retries, var.max_retries + 10), 1000)
  dlq_retention     = 1209600 # 14 days, the most SQS keeps a message

  sse_sqs = var.kms_key_arn == null

  queue_arns = concat([aws_sqs_queue.dlq.arn], [for name in local.work_names : aws_sqs_queue.work[name].arn])
}

resource "aws_sqs_queue" "dlq" {
  name                       = local.dlq_name
  visibility_timeout_seconds = var.visibility_timeout_seconds
  max_message_size           = local.max_message_size
  message_retention_seconds  = local.dlq_retention
  delay_seconds              = 0

  sqs_managed_sse_enabled           = local.sse_sqs ? true : null
  kms_master_key_id                 = var.kms_key_arn
  kms_data_key_reuse_period_seconds = local.sse_sqs ? null : var.kms_data_key_reuse_period_seconds

  tags = var.tags
}

resource "aws_sqs_queue" "work" {
  for_each = toset(local.work_names)

  name                       = each.key
  visibility_timeout_seconds = var.visibility_timeout_seconds
  max_message_size           = local.max_message_size
  message_retention_seconds  = var.message_retention_seconds
  delay_seconds              = 0
  redrive_policy = jsonencode({
    deadLetterTargetArn = aws_sqs_queue.dlq.arn
    maxReceiveCount     = local.max_receive_count
  })

  sqs_managed_sse_enabled           = local.sse_sqs ? true : null
  kms_master_key_id                 = var.kms_key_arn
  kms_data_key_reuse_period_seconds = local.sse_sqs ? null : var.kms_data_key_reuse_period_seconds

  tags = var.tags
}
