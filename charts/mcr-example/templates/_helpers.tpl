{{/* The chart's name, or nameOverride. */}}
{{- define "mcr-example.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Object names: fullnameOverride, the release name when it holds the chart name, else
<release>-<chart>. */}}
{{- define "mcr-example.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "mcr-example.selectorLabels" -}}
app.kubernetes.io/name: {{ include "mcr-example.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "mcr-example.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "mcr-example.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: mcr
{{- end }}

{{- define "mcr-example.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "mcr-example.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The subject every binding names. */}}
{{- define "mcr-example.subjects" -}}
subjects:
  - kind: ServiceAccount
    name: {{ include "mcr-example.serviceAccountName" . }}
    namespace: {{ .Release.Namespace }}
{{- end }}

{{- define "mcr-example.webhookSecret" -}}
{{- default (printf "%s-webhook-tls" (include "mcr-example.fullname" .)) .Values.webhook.certificate.secretName }}
{{- end }}

{{/* Memory request in KiB: the process, the members this replica engages, and (sharding)
the members the other replicas engage. */}}
{{- define "mcr-example.memoryKiB" -}}
{{- $s := .Values.sizing }}
{{- $members := int $s.members }}
{{- $own := $members }}
{{- if eq .Values.mode "sharding" }}
{{- $replicas := max 1 (int .Values.replicas) }}
{{- $own = div (add $members (sub $replicas 1)) $replicas }}
{{- end }}
{{- add (mul (int $s.baseMiB) 1024) (mul $own (int $s.perMemberKiB)) (mul (sub $members $own) (int $s.perOtherMemberKiB)) }}
{{- end }}

{{/* Fails rendering on values the chart does not know. */}}
{{- define "mcr-example.validate" -}}
{{- $providers := list "kubeconfig" "capi" "cluster-inventory" "namespace" "gardener" }}
{{- if not (has .Values.provider $providers) }}
{{- fail (printf "provider must be one of %s, not %q" (join ", " $providers) .Values.provider) }}
{{- end }}
{{- if not (has .Values.mode (list "leaderElection" "sharding")) }}
{{- fail (printf "mode must be leaderElection or sharding, not %q" .Values.mode) }}
{{- end }}
{{- if not (has .Values.webhook.certificate.source (list "helm" "cert-manager" "secret")) }}
{{- fail (printf "webhook.certificate.source must be helm, cert-manager or secret, not %q" .Values.webhook.certificate.source) }}
{{- end }}
{{- if and .Values.webhook.enabled (eq .Values.mode "sharding") (not .Values.webhook.reviewOnly) }}
{{- fail "webhook.enabled with mode: sharding sends a member's review to any replica, and only the member's owner can answer a handler that needs the member (the others fail it, 503): set webhook.reviewOnly=true if every member webhook decides from the review alone (with_review_validator, with_review_defaulter, with_review_converter), or use mode: leaderElection, where every replica answers every review" }}
{{- end }}
{{- if and .Values.webhook.enabled (eq .Values.webhook.certificate.source "secret") (not .Values.webhook.certificate.secretName) }}
{{- fail "webhook.certificate.secretName is required when webhook.certificate.source is secret" }}
{{- end }}
{{- end }}
