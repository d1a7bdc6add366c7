{{/* The release's base name, at most 63 characters. */}}
{{- define "fairq.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "fairq.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selector labels of a component: call with (list $ "gateway"). */}}
{{- define "fairq.selectorLabels" -}}
{{- $ := index . 0 -}}
app.kubernetes.io/name: {{ $.Chart.Name }}
app.kubernetes.io/instance: {{ $.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{/* The image reference: by digest when given, else by tag (appVersion by default), never latest. */}}
{{- define "fairq.image" -}}
{{- $tag := .Values.image.tag | default .Chart.AppVersion | toString -}}
{{- if eq $tag "latest" -}}
{{- fail "image.tag latest is not allowed: name a release" -}}
{{- end -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository $tag -}}
{{- end -}}
{{- end -}}

{{/* The service account of a role: call with (list $ "gateway"). */}}
{{- define "fairq.serviceAccountName" -}}
{{- $ := index . 0 -}}
{{- $sa := index $.Values.serviceAccount (index . 1) -}}
{{- if $sa.create -}}
{{- $sa.name | default (printf "%s-%s" (include "fairq.fullname" $) (index . 1)) -}}
{{- else -}}
{{- $sa.name | default "default" -}}
{{- end -}}
{{- end -}}

{{- define "fairq.secretName" -}}
{{- .Values.secret.existingSecret | default (include "fairq.fullname" .) -}}
{{- end -}}

{{/*
The fairq container of a role: call with (list $ "gateway") or (list $ "worker").
GOMEMLIMIT follows the container's memory limit, so that the garbage
collector works harder before the kernel kills the process.
*/}}
{{- define "fairq.container" -}}
{{- $ := index . 0 -}}
{{- $role := index . 1 -}}
{{- $v := index $.Values $role -}}
name: fairq
image: {{ include "fairq.image" $ }}
imagePullPolicy: {{ $.Values.image.pullPolicy }}
args: [{{ $role }}, --config, /etc/fairq/fairq.yaml]
env:
  - name: FAIRQ_LISTEN
    value: "0.0.0.0:{{ $v.port }}"
  - name: FAIRQ_REDIS_PASSWORD
    valueFrom:
      secretKeyRef: {name: {{ include "fairq.secretName" $ }}, key: redis-password, optional: true}
  {{- if eq $role "gateway" }}
  - name: FAIRQ_ADMIN_TOKEN_SHA256
    valueFrom:
      secretKeyRef: {name: {{ include "fairq.secretName" $ }}, key: admin-token-sha256, optional: true}
  {{- end }}
  - name: GOMEMLIMIT
    valueFrom:
      resourceFieldRef: {containerName: fairq, resource: limits.memory}
  {{- with $v.extraEnv }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
ports:
  - name: {{ if eq $role "gateway" }}http{{ else }}metrics{{ end }}
    containerPort: {{ $v.port }}
    protocol: TCP
readinessProbe:
  httpGet: {path: /readyz, port: {{ $v.port }}}
  periodSeconds: 5
  failureThreshold: 2
livenessProbe:
  httpGet: {path: /healthz, port: {{ $v.port }}}
  periodSeconds: 10
  failureThreshold: 3
resources:
  {{- toYaml $v.resources | nindent 2 }}
securityContext:
  {{- toYaml $.Values.securityContext | nindent 2 }}
volumeMounts:
  - {name: config, mountPath: /etc/fairq, readOnly: true}
{{- end -}}

{{/* The pod-level settings both Deployments share: call with (list $ "gateway"). */}}
{{- define "fairq.podCommon" -}}
{{- $ := index . 0 -}}
{{- $v := index $.Values (index . 1) -}}
serviceAccountName: {{ include "fairq.serviceAccountName" . }}
automountServiceAccountToken: false
securityContext:
  {{- toYaml $.Values.podSecurityContext | nindent 2 }}
{{- with $.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
affinity:
{{- if $v.affinity }}
  {{- toYaml $v.affinity | nindent 2 }}
{{- else }}
  # By default, spread the replicas over nodes where the scheduler can.
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          labelSelector:
            matchLabels:
              {{- include "fairq.selectorLabels" . | nindent 14 }}
{{- end }}
{{- with $v.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml . | nindent 2 }}
{{- end }}
# The worker finishes running jobs within 25 s of SIGTERM, the gateway
# drains requests for 10 s: both exit well within this.
terminationGracePeriodSeconds: 40
volumes:
  - name: config
    configMap:
      name: {{ include "fairq.fullname" $ }}
{{- end -}}
