// Package deploy holds what it takes to run fairq in production, and the
// tests that check each piece with the tool that consumes it:
//
//   - iam/: a least-privilege IAM policy per role, rendered from package
//     iam (go generate ./deploy/iam), checked against the SQS calls each
//     role makes on the emulator;
//   - terraform/: the queues, their encryption, the roles' policies and
//     CloudWatch alarms, checked by evaluating the HCL against what
//     `fairq queues create` makes;
//   - helm/fairq/: the Helm chart (helm lint and template, strict decoding
//     into the Kubernetes API types, kube-score), and kubernetes/, its
//     rendering with documented values;
//   - systemd/: sandboxed units (systemd-analyze security);
//   - elasticbeanstalk/: the platform hooks that run `fairq worker` in
//     place of aws-sqsd (bash -n, shellcheck, fairq's config loader);
//   - image/ and the Dockerfile at the root: the container image (built
//     and run with buildah);
//   - grafana/ and prometheus/: a dashboard and alerting rules with their
//     unit tests (promtool; runbooks in docs/alerts.md), whose queries may
//     name only the metrics the binary registers.
//
// Tools that are missing make their tests skip, or fail with
// FAIRQ_REQUIRE_SERVICES=1; `make deps` installs them.
package deploy
