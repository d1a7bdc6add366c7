output "queue_urls" {
  description = "Every queue's URL by name, the DLQ included."
  value       = merge({ (local.dlq_name) = aws_sqs_queue.dlq.url }, { for name, q in aws_sqs_queue.work : name => q.url })
}

output "queue_arns" {
  description = "Every queue's ARN, the DLQ first."
  value       = local.queue_arns
}

output "dlq_arn" {
  description = "The dead-letter queue's ARN."
  value       = aws_sqs_queue.dlq.arn
}

output "policy_arns" {
  description = "The IAM policy of each role (gateway, worker, admin), to attach to the role its processes run under."
  value       = { for role, p in aws_iam_policy.role : role => p.arn }
}

output "fairq_config" {
  description = "The keys of fairq's configuration that must match this module."
  value = {
    sqs = {
      queue_prefix = var.queue_prefix
    }
    pool = {
      queues = var.pool_queues
    }
    worker = {
      visibility_timeout = "${var.visibility_timeout_seconds}s"
      max_retries        = var.max_retries
    }
    gateway = {
      max_message_size = var.max_message_size
    }
  }
}
