# Keep these equal to fairq's configuration (sqs.queue_prefix, pool.queues,
# worker.visibility_timeout, gateway.max_message_size, worker.max_retries):
# the module makes the queues `fairq queues create` would make with it.

variable "queue_prefix" {
  description = "sqs.queue_prefix: every queue name starts with it."
  type        = string
  default     = "fairq"

  validation {
    condition     = can(regex("^[A-Za-z0-9_-]{1,71}$", var.queue_prefix))
    error_message = "The prefix must be 1-71 letters, digits, '-' or '_' (SQS names are at most 80 characters)."
  }
}

variable "pool_queues" {
  description = "pool.queues: the number of live queues (prefix-live-00 ...)."
  type        = number
  default     = 8

  validation {
    condition     = var.pool_queues >= 1 && var.pool_queues <= 1000 && floor(var.pool_queues) == var.pool_queues
    error_message = "pool_queues must be a whole number from 1 to 1000."
  }
}

variable "visibility_timeout_seconds" {
  description = "worker.visibility_timeout in seconds (heartbeats extend it while a job runs)."
  type        = number
  default     = 30
}

variable "max_message_size" {
  description = "gateway.max_message_size in bytes; the queues take at least 262144 (256 KiB), at most 1048576."
  type        = number
  default     = 262144

  validation {
    condition     = var.max_message_size >= 1024 && var.max_message_size <= 1048576
    error_message = "max_message_size must be from 1024 to 1048576 bytes."
  }
}

variable "max_retries" {
  description = "worker.max_retries: the queues' RedrivePolicy sends a message to the DLQ after max(2 x this, this + 10) receives, the backstop for deliveries the worker never finished."
  type        = number
  default     = 10
}

variable "message_retention_seconds" {
  description = "Retention of the live, overflow and backlog queues (SQS's default, 4 days, as `fairq queues create` sets); the DLQ keeps messages 14 days."
  type        = number
  default     = 345600
}

variable "kms_key_arn" {
  description = "A customer managed KMS key to encrypt the queues with (SSE-KMS). null: SQS-managed encryption (SSE-SQS), which needs no key permissions."
  type        = string
  default     = null
}

variable "kms_data_key_reuse_period_seconds" {
  description = "With a KMS key: how long SQS reuses a data key before calling KMS again (60-86400); longer is cheaper."
  type        = number
  default     = 300
}

variable "alarms_enabled" {
  description = "Create the CloudWatch alarms on the queues' oldest message age and the DLQ's depth."
  type        = bool
  default     = true
}

variable "alarm_actions" {
  description = "ARNs (SNS topics, ...) notified when an alarm fires and when it clears."
  type        = list(string)
  default     = []
}

variable "live_age_alarm_seconds" {
  description = "Alarm when a live queue's oldest message is older than this (worker.backlog_age is 5 minutes: older messages should have moved to the backlog)."
  type        = number
  default     = 600
}

variable "overflow_age_alarm_seconds" {
  description = "Alarm when the overflow queue's oldest message is older than this (spilled messages wait up to 900 s by design)."
  type        = number
  default     = 1800
}

variable "backlog_age_alarm_seconds" {
  description = "Alarm when the backlog queue's oldest message is older than this."
  type        = number
  default     = 21600
}

variable "dlq_depth_alarm_threshold" {
  description = "Alarm when the DLQ holds more visible messages than this."
  type        = number
  default     = 0
}

variable "tags" {
  description = "Tags for every resource."
  type        = map(string)
  default     = {}
}
