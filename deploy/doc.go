// Package deploy holds what it takes to run fairq in production, as files
// an operator copies and edits: least-privilege IAM policies for each role
// (iam/), systemd units (systemd/), Kubernetes manifests with a worker
// beside its application and autoscaling on fairq's backlog signals
// (kubernetes/), a Grafana dashboard (grafana/) and Prometheus alerting
// rules with their unit tests (prometheus/; runbooks in docs/alerts.md).
// The package has no code of its own: its tests keep the files in step
// with the binary (the SQS actions each role calls, the commands and flags
// it takes, the shutdown grace it needs, the metrics it registers).
package deploy
