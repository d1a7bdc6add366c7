package deploy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/fairq/fairq/config"
)

// The chart is checked with the real helm (lint, template) and kube-score,
// and every object it renders is decoded into the Kubernetes API's own Go
// types with unknown fields rejected, then held to the rules fairq's pods
// keep (below), for several sets of values.

const (
	chartDir = "helm/fairq"
	// kubeVersion is the cluster version helm renders for; the chart needs
	// 1.25 or later.
	kubeVersion = "1.30.0"
	// documentedValues are the values deploy/kubernetes/fairq.yaml is
	// rendered from.
	documentedValues = "kubernetes/values.yaml"
	// rendered is the committed rendering.
	rendered = "kubernetes/fairq.yaml"
)

const helmInstall = "run make deps (go install helm.sh/helm/v3/cmd/helm@v3.22.0)"

// helmTemplate renders the chart as release fairq in namespace fairq.
func helmTemplate(ctx context.Context, helm string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, helm, append([]string{"template", "fairq", chartDir, "--namespace", "fairq", "--kube-version", kubeVersion}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("helm template %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out, nil
}

func TestHelmLint(t *testing.T) {
	helm := tool(t, "helm", helmInstall)
	lint := func(chart string, args ...string) ([]byte, error) {
		cmd := exec.CommandContext(t.Context(), helm, append([]string{"lint", "--strict", chart, "--kube-version", kubeVersion}, args...)...)
		return cmd.CombinedOutput()
	}
	for _, args := range [][]string{nil, {"-f", documentedValues}} {
		out, err := lint(chartDir, args...)
		if err != nil {
			t.Errorf("helm lint --strict %v: %v\n%s", args, err, out)
		}
		t.Logf("helm lint --strict %v: %s", args, lastLine(out))
	}
	// Negative control: a template that reads a missing value fails lint.
	broken := filepath.Join(t.TempDir(), "fairq")
	copyDir(t, chartDir, broken)
	write(t, filepath.Join(broken, "templates", "broken.yaml"), "x: {{ .Values.missing.deeper }}\n")
	if out, err := lint(broken); err == nil {
		t.Errorf("helm lint passed a broken template: the check cannot fail\n%s", out)
	}
}

// valueSets are the values the chart is rendered with in the tests.
func valueSets(t *testing.T) map[string][]string {
	rules := filepath.Join(t.TempDir(), "alerts.yaml")
	write(t, rules, `groups:
  - name: fairq
    rules:
      - alert: FairqDeadLetters
        expr: increase(fairq_worker_dead_lettered_total[15m]) > 0
        for: 1m
        labels: {severity: warning}
        annotations: {summary: "messages were dead-lettered"}
`)
	return map[string][]string{
		"defaults":   nil,
		"documented": {"-f", documentedValues},
		"everything": {"-f", documentedValues,
			"--set", "prometheusRule.enabled=true", "--set-file", "prometheusRule.rulesFile=" + rules,
			"--set", "secret.create=true,secret.existingSecret=,secret.redisPassword=pw",
			"--set", "secret.adminTokenSha256=" + strings.Repeat("ab", 32),
			"--set", "image.digest=sha256:" + strings.Repeat("0", 64)},
		"standalone worker": {"--set", "config.worker.push_url=http://app.default.svc.cluster.local/", "--set", "worker.keda.enabled=true"},
		"worker only":       {"--set", "gateway.enabled=false"},
	}
}

// TestHelmTemplate renders the chart with each set of values, decodes
// every object strictly and checks the pods.
func TestHelmTemplate(t *testing.T) {
	helm := tool(t, "helm", helmInstall)
	for name, args := range valueSets(t) {
		t.Run(name, func(t *testing.T) {
			out, err := helmTemplate(t.Context(), helm, args...)
			if err != nil {
				t.Fatal(err)
			}
			objs, err := decodeAll(out)
			if err != nil {
				t.Fatal(err)
			}
			if problems := checkObjects(objs); len(problems) > 0 {
				t.Errorf("rendering with %v:\n%s", args, strings.Join(problems, "\n"))
			}
		})
	}

	// Negative controls: helm refuses the latest tag and a rules file
	// without groups; a rendering without a PDB and with a privileged
	// container fails the checks; an unknown field fails decoding.
	for _, args := range [][]string{
		{"--set", "image.tag=latest"},
		{"--set", "prometheusRule.enabled=true", "--set", "prometheusRule.rulesFile=rules: []"},
	} {
		if _, err := helmTemplate(t.Context(), helm, args...); err == nil {
			t.Errorf("helm template %v succeeded", args)
		}
	}
	out, err := helmTemplate(t.Context(), helm)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeAll(out)
	if err != nil {
		t.Fatal(err)
	}
	var weakened []any
	for _, o := range objs {
		switch o := o.(type) {
		case *policyv1.PodDisruptionBudget:
			continue
		case *appsv1.Deployment:
			o.Spec.Template.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation = new(true)
		}
		weakened = append(weakened, o)
	}
	problems := strings.Join(checkObjects(weakened), "\n")
	for _, want := range []string{"allowPrivilegeEscalation", "PodDisruptionBudget"} {
		if !strings.Contains(problems, want) {
			t.Errorf("a weakened rendering passed the %s check: it cannot fail\n%s", want, problems)
		}
	}
	if _, err := decodeAll([]byte("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec: {replicaz: 2}\n")); err == nil {
		t.Error("a Deployment with an unknown field decoded: the check cannot fail")
	}
}

// TestKubeScore runs kube-score on each rendering: no critical finding.
func TestKubeScore(t *testing.T) {
	helm := tool(t, "helm", helmInstall)
	kubeScore := tool(t, "kube-score", "run make deps (go install github.com/zegl/kube-score/cmd/kube-score@v1.20.0)")
	score := func(manifest []byte) ([]byte, error) {
		f := filepath.Join(t.TempDir(), "fairq.yaml")
		write(t, f, string(manifest))
		return exec.CommandContext(t.Context(), kubeScore, "score", "--output-format", "ci", f).CombinedOutput()
	}
	for name, args := range valueSets(t) {
		t.Run(name, func(t *testing.T) {
			out, err := helmTemplate(t.Context(), helm, args...)
			if err != nil {
				t.Fatal(err)
			}
			res, err := score(out)
			if err != nil || bytes.Contains(res, []byte("[CRITICAL]")) {
				t.Errorf("kube-score: %v\n%s", err, grepLines(res, "[CRITICAL]", "[WARNING]"))
			}
			t.Logf("kube-score: %d OK, %d warnings, %d critical", bytes.Count(res, []byte("[OK]")),
				bytes.Count(res, []byte("[WARNING]")), bytes.Count(res, []byte("[CRITICAL]")))
		})
	}
	// Negative control: a writable root filesystem and no resources are
	// critical findings.
	out, err := helmTemplate(t.Context(), helm, "--set", "securityContext.readOnlyRootFilesystem=false", "--set", "gateway.resources=null")
	if err != nil {
		t.Fatal(err)
	}
	if res, err := score(out); err == nil || !bytes.Contains(res, []byte("[CRITICAL]")) {
		t.Errorf("kube-score passed a writable root filesystem without resources: the check cannot fail\n%s", res)
	}
}

// TestRenderedManifests checks that deploy/kubernetes/fairq.yaml is the
// chart rendered with the documented values (make manifests).
func TestRenderedManifests(t *testing.T) {
	helm := tool(t, "helm", helmInstall)
	want, err := helmTemplate(t.Context(), helm, "-f", documentedValues)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(rendered)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from helm template with %s: run make manifests\n%s", rendered, documentedValues, cmp.Diff(string(want), string(got)))
	}
}

// TestSidecarSnippet checks that the sidecar the chart's README tells users
// to paste into their own Deployment is the worker container the chart
// renders with the documented values.
func TestSidecarSnippet(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(chartDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)<!-- sidecar -->\\s*```yaml\n(.*?)```").FindSubmatch(readme)
	if m == nil {
		t.Fatal("no ```yaml block after <!-- sidecar --> in the chart's README")
	}
	var snippet corev1.PodSpec
	if err := yaml.UnmarshalStrict(m[1], &snippet); err != nil {
		t.Fatalf("the sidecar snippet: %v", err)
	}
	raw, err := os.ReadFile(rendered)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeAll(raw)
	if err != nil {
		t.Fatal(err)
	}
	var worker *corev1.PodSpec
	for _, o := range objs {
		if d, ok := o.(*appsv1.Deployment); ok && strings.HasSuffix(d.Name, "-worker") {
			worker = &d.Spec.Template.Spec
		}
	}
	if worker == nil {
		t.Fatalf("no worker Deployment in %s", rendered)
	}
	fairq := slices.IndexFunc(worker.Containers, func(c corev1.Container) bool { return c.Name == "fairq" })
	if len(snippet.Containers) != 1 || fairq < 0 {
		t.Fatalf("snippet containers %d, rendered fairq container at %d", len(snippet.Containers), fairq)
	}
	if diff := cmp.Diff(worker.Containers[fairq], snippet.Containers[0]); diff != "" {
		t.Errorf("the README's sidecar differs from the rendered worker container (-rendered +README):\n%s", diff)
	}
	if diff := cmp.Diff(worker.Volumes, snippet.Volumes); diff != "" {
		t.Errorf("the README's volumes differ from the rendered worker's (-rendered +README):\n%s", diff)
	}
}

// Custom resources: only the fields the chart uses, decoded strictly.
type (
	serviceMonitor struct {
		metav1.TypeMeta `json:",inline"`
		Metadata        metav1.ObjectMeta `json:"metadata"`
		Spec            struct {
			Selector          metav1.LabelSelector `json:"selector"`
			NamespaceSelector struct {
				MatchNames []string `json:"matchNames"`
			} `json:"namespaceSelector"`
			Endpoints []struct {
				Port     string `json:"port"`
				Path     string `json:"path"`
				Interval string `json:"interval"`
			} `json:"endpoints"`
		} `json:"spec"`
	}
	prometheusRule struct {
		metav1.TypeMeta `json:",inline"`
		Metadata        metav1.ObjectMeta `json:"metadata"`
		Spec            struct {
			Groups []struct {
				Name     string            `json:"name"`
				Interval string            `json:"interval,omitempty"`
				Limit    int               `json:"limit,omitempty"`
				Labels   map[string]string `json:"labels,omitempty"`
				Rules    []struct {
					Alert         string            `json:"alert,omitempty"`
					Record        string            `json:"record,omitempty"`
					Expr          string            `json:"expr"`
					For           string            `json:"for,omitempty"`
					KeepFiringFor string            `json:"keep_firing_for,omitempty"`
					Labels        map[string]string `json:"labels,omitempty"`
					Annotations   map[string]string `json:"annotations,omitempty"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
	scaledObject struct {
		metav1.TypeMeta `json:",inline"`
		Metadata        metav1.ObjectMeta `json:"metadata"`
		Spec            struct {
			ScaleTargetRef struct {
				Name string `json:"name"`
			} `json:"scaleTargetRef"`
			MinReplicaCount int `json:"minReplicaCount"`
			MaxReplicaCount int `json:"maxReplicaCount"`
			PollingInterval int `json:"pollingInterval"`
			CooldownPeriod  int `json:"cooldownPeriod"`
			Triggers        []struct {
				Type       string            `json:"type"`
				MetricType string            `json:"metricType"`
				Metadata   map[string]string `json:"metadata"`
			} `json:"triggers"`
		} `json:"spec"`
	}
)

// kinds maps apiVersion/kind to a new object of its Go type.
var kinds = map[string]func() any{
	"apps/v1/Deployment":                      func() any { return new(appsv1.Deployment) },
	"v1/Service":                              func() any { return new(corev1.Service) },
	"v1/ConfigMap":                            func() any { return new(corev1.ConfigMap) },
	"v1/Secret":                               func() any { return new(corev1.Secret) },
	"v1/ServiceAccount":                       func() any { return new(corev1.ServiceAccount) },
	"policy/v1/PodDisruptionBudget":           func() any { return new(policyv1.PodDisruptionBudget) },
	"networking.k8s.io/v1/NetworkPolicy":      func() any { return new(networkingv1.NetworkPolicy) },
	"monitoring.coreos.com/v1/ServiceMonitor": func() any { return new(serviceMonitor) },
	"monitoring.coreos.com/v1/PrometheusRule": func() any { return new(prometheusRule) },
	"keda.sh/v1alpha1/ScaledObject":           func() any { return new(scaledObject) },
}

var docSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// decodeAll decodes every document of a multi-document YAML stream into
// its Go type, rejecting unknown kinds, unknown fields and duplicate keys.
func decodeAll(stream []byte) ([]any, error) {
	var objs []any
	var errs []error
	for i, doc := range docSeparator.Split(string(stream), -1) {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			errs = append(errs, fmt.Errorf("document %d: %w", i, err))
			continue
		}
		if meta.Kind == "" && strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		newObj := kinds[meta.APIVersion+"/"+meta.Kind]
		if newObj == nil {
			errs = append(errs, fmt.Errorf("document %d: unknown kind %s/%s", i, meta.APIVersion, meta.Kind))
			continue
		}
		obj := newObj()
		if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
			errs = append(errs, fmt.Errorf("document %d (%s): %w", i, meta.Kind, err))
			continue
		}
		objs = append(objs, obj)
	}
	return objs, errors.Join(errs...)
}

func stripComments(doc string) string {
	var b strings.Builder
	for line := range strings.Lines(doc) {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			b.WriteString(line)
		}
	}
	return b.String()
}

// checkObjects holds a rendering to the rules fairq's pods keep (the
// critical checks of kube-score and more): each returned line is a
// problem.
func checkObjects(objs []any) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	var deployments []*appsv1.Deployment
	var pdbs []*policyv1.PodDisruptionBudget
	var configMaps []*corev1.ConfigMap
	var scaled []*scaledObject
	for _, o := range objs {
		switch o := o.(type) {
		case *appsv1.Deployment:
			deployments = append(deployments, o)
		case *policyv1.PodDisruptionBudget:
			pdbs = append(pdbs, o)
		case *corev1.ConfigMap:
			configMaps = append(configMaps, o)
		case *scaledObject:
			scaled = append(scaled, o)
		case *prometheusRule:
			if len(o.Spec.Groups) == 0 || len(o.Spec.Groups[0].Rules) == 0 {
				bad("PrometheusRule %s has no rules", o.Metadata.Name)
			}
		}
	}
	if len(deployments) == 0 {
		bad("no Deployment")
	}
	for _, d := range deployments {
		name := "Deployment " + d.Name
		pod := d.Spec.Template.Spec
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			bad("%s: selector %v does not select its pods (%v)", name, d.Spec.Selector, err)
		}
		if !slices.ContainsFunc(pdbs, func(p *policyv1.PodDisruptionBudget) bool {
			s, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
			return err == nil && s.Matches(labels.Set(d.Spec.Template.Labels))
		}) {
			bad("%s: no PodDisruptionBudget selects its pods", name)
		}
		if pod.HostNetwork || pod.HostPID || pod.HostIPC {
			bad("%s: shares the host's network, PIDs or IPC", name)
		}
		if g := pod.TerminationGracePeriodSeconds; g == nil || *g <= 35 {
			bad("%s: terminationGracePeriodSeconds %v, want more than 35 (10 s drain + 25 s worker grace)", name, g)
		}
		if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
			bad("%s: mounts a service account token fairq does not use", name)
		}
		psc := pod.SecurityContext
		if psc == nil {
			psc = &corev1.PodSecurityContext{}
		}
		var fairq int
		for _, c := range pod.Containers {
			cname := name + " container " + c.Name
			problems = append(problems, checkContainer(cname, c, psc)...)
			if c.Name == "fairq" {
				fairq++
				problems = append(problems, checkFairqContainer(cname, c, configMaps)...)
			}
		}
		if fairq != 1 {
			bad("%s: %d fairq containers, want 1", name, fairq)
		}
		if d.Spec.Replicas != nil && slices.ContainsFunc(scaled, func(s *scaledObject) bool { return s.Spec.ScaleTargetRef.Name == d.Name }) {
			bad("%s: sets replicas although a ScaledObject scales it", name)
		}
	}
	for _, s := range scaled {
		if !slices.ContainsFunc(deployments, func(d *appsv1.Deployment) bool { return d.Name == s.Spec.ScaleTargetRef.Name }) {
			bad("ScaledObject %s scales %q, no Deployment of the rendering", s.Metadata.Name, s.Spec.ScaleTargetRef.Name)
		}
		for _, tr := range s.Spec.Triggers {
			q := tr.Metadata["query"]
			if tr.Type != "prometheus" || !strings.Contains(q, "fairq_backlog_per_instance") || !strings.Contains(q, "fairq_backlog_target_per_instance") {
				bad("ScaledObject %s: trigger %s on %q, want prometheus on fairq_backlog_per_instance against fairq_backlog_target_per_instance", s.Metadata.Name, tr.Type, q)
			}
		}
	}
	return problems
}

// checkContainer applies the rules every container of a fairq pod keeps.
func checkContainer(name string, c corev1.Container, psc *corev1.PodSecurityContext) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage} {
		if _, ok := c.Resources.Requests[r]; !ok {
			bad("%s: no %s request", name, r)
		}
		if _, ok := c.Resources.Limits[r]; !ok {
			bad("%s: no %s limit", name, r)
		}
	}
	// An image pinned by digest (name@sha256:…) needs no tag.
	if ref := c.Image; !strings.Contains(ref, "@") {
		if i := strings.LastIndex(ref, ":"); i < 0 || i < strings.LastIndex(ref, "/") || ref[i+1:] == "latest" {
			bad("%s: image %q has no tag, or latest", name, c.Image)
		}
	}
	if c.ImagePullPolicy != corev1.PullAlways {
		bad("%s: imagePullPolicy %q, want Always", name, c.ImagePullPolicy)
	}
	if c.ReadinessProbe == nil || c.LivenessProbe == nil {
		bad("%s: readiness probe %v, liveness probe %v", name, c.ReadinessProbe != nil, c.LivenessProbe != nil)
	}
	for _, p := range c.Ports {
		if p.HostPort != 0 {
			bad("%s: host port %d", name, p.HostPort)
		}
	}
	sc := c.SecurityContext
	if sc == nil {
		bad("%s: no securityContext", name)
		return problems
	}
	if !isTrue(sc.RunAsNonRoot) && !isTrue(psc.RunAsNonRoot) {
		bad("%s: runAsNonRoot not set", name)
	}
	uid := sc.RunAsUser
	if uid == nil {
		uid = psc.RunAsUser
	}
	if uid == nil || *uid < 10000 {
		bad("%s: runAsUser %v, want a uid of 10000 or more (none of the host's)", name, uid)
	}
	if !isTrue(sc.ReadOnlyRootFilesystem) {
		bad("%s: readOnlyRootFilesystem not true", name)
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		bad("%s: allowPrivilegeEscalation not false", name)
	}
	if isTrue(sc.Privileged) {
		bad("%s: privileged", name)
	}
	if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
		bad("%s: capabilities %v, want drop ALL and add none", name, sc.Capabilities)
	}
	seccomp := sc.SeccompProfile
	if seccomp == nil {
		seccomp = psc.SeccompProfile
	}
	if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
		bad("%s: seccompProfile %v, want RuntimeDefault", name, seccomp)
	}
	return problems
}

// checkFairqContainer applies what fairq itself needs: a command it has,
// probes on the port it listens on, GOMEMLIMIT from its memory limit, and
// a configuration its loader accepts.
func checkFairqContainer(name string, c corev1.Container, configMaps []*corev1.ConfigMap) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if len(c.Args) != 3 || (c.Args[0] != "gateway" && c.Args[0] != "worker") || c.Args[1] != "--config" {
		bad("%s: args %v, want gateway|worker --config FILE", name, c.Args)
		return problems
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	listen := env["FAIRQ_LISTEN"].Value
	port := listen[strings.LastIndex(listen, ":")+1:]
	for _, p := range []struct {
		probe *corev1.Probe
		path  string
	}{{c.ReadinessProbe, "/readyz"}, {c.LivenessProbe, "/healthz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port.String() != port {
			bad("%s: want a probe GET %s on port %s (FAIRQ_LISTEN %q)", name, p.path, port, listen)
		}
	}
	if mem := env["GOMEMLIMIT"].ValueFrom; mem == nil || mem.ResourceFieldRef == nil ||
		mem.ResourceFieldRef.Resource != "limits.memory" || mem.ResourceFieldRef.ContainerName != "fairq" {
		bad("%s: GOMEMLIMIT does not follow the container's memory limit", name)
	}
	// The configuration file fairq reads, with the container's FAIRQ_
	// variables that have values.
	dir := filepath.Dir(c.Args[2])
	var volume string
	for _, m := range c.VolumeMounts {
		if m.MountPath == dir {
			volume = m.Name
		}
	}
	if volume == "" {
		bad("%s: nothing mounted at %s", name, dir)
	}
	for _, cm := range configMaps {
		data, ok := cm.Data[filepath.Base(c.Args[2])]
		if !ok {
			continue
		}
		getenv := func(k string) string { return env[k].Value }
		if _, err := config.Parse([]byte(data), getenv); err != nil {
			bad("%s: fairq rejects ConfigMap %s: %v", name, cm.Name, err)
		}
		return problems
	}
	bad("%s: no ConfigMap holds %s", name, filepath.Base(c.Args[2]))
	return problems
}

func isTrue(b *bool) bool { return b != nil && *b }

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

func grepLines(b []byte, subs ...string) string {
	var out []string
	for line := range strings.Lines(string(b)) {
		for _, s := range subs {
			if strings.Contains(line, s) {
				out = append(out, strings.TrimSpace(line))
				break
			}
		}
	}
	return strings.Join(out, "\n")
}

func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}
