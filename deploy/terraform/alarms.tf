# CloudWatch alarms: a queue whose oldest message keeps getting older is
# not being worked (workers down, too few, or a tenant stuck); a message in
# the DLQ failed worker.max_retries times and waits for `fairq dlq redrive`.

locals {
  age_alarms = var.alarms_enabled ? merge(
    { for name in local.live_names : name => var.live_age_alarm_seconds },
    { (local.overflow_name) = var.overflow_age_alarm_seconds },
    { (local.backlog_name) = var.backlog_age_alarm_seconds },
  ) : {}
}

resource "aws_cloudwatch_metric_alarm" "oldest_message_age" {
  for_each = local.age_alarms

  alarm_name          = "${each.key}-oldest-message-age"
  alarm_description   = "The oldest message of ${each.key} is older than ${each.value} s: fairq's workers are not keeping up."
  namespace           = "AWS/SQS"
  metric_name         = "ApproximateAgeOfOldestMessage"
  dimensions          = { QueueName = each.key }
  statistic           = "Maximum"
  period              = 60
  evaluation_periods  = 5
  threshold           = each.value
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = var.alarm_actions
  ok_actions          = var.alarm_actions

  tags = var.tags

  depends_on = [aws_sqs_queue.work]
}

resource "aws_cloudwatch_metric_alarm" "dlq_depth" {
  count = var.alarms_enabled ? 1 : 0

  alarm_name          = "${local.dlq_name}-depth"
  alarm_description   = "${local.dlq_name} holds dead letters: inspect them (fairq dlq peek) and redrive them (fairq dlq redrive)."
  namespace           = "AWS/SQS"
  metric_name         = "ApproximateNumberOfMessagesVisible"
  dimensions          = { QueueName = aws_sqs_queue.dlq.name }
  statistic           = "Maximum"
  period              = 60
  evaluation_periods  = 1
  threshold           = var.dlq_depth_alarm_threshold
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = var.alarm_actions
  ok_actions          = var.alarm_actions

  tags = var.tags
}
