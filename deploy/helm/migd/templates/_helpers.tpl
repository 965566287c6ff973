{{/*
Names and labels shared by every template.
*/}}
{{- define "migd.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Full name: the release name, plus the chart name unless the release name already
contains it. Truncated to 63 characters (DNS label limit).
*/}}
{{- define "migd.fullname" -}}
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

{{- define "migd.selectorLabels" -}}
app.kubernetes.io/name: {{ include "migd.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "migd.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "migd.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "migd.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "migd.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The port of config.metrics.listen ("0.0.0.0:9400" -> 9400; "[::]:9400" -> 9400).
*/}}
{{- define "migd.metricsPort" -}}
{{- regexReplaceAll "^.*:" .Values.config.metrics.listen "" }}
{{- end }}

{{/*
The directory of config.api.socket, mounted from socketHostPath.
*/}}
{{- define "migd.socketDir" -}}
{{- regexReplaceAll "/[^/]*$" .Values.config.api.socket "" }}
{{- end }}

{{/*
`migctl status` over the API socket: the liveness and readiness check.
*/}}
{{- define "migd.probeCommand" -}}
exec:
  command:
    - /usr/bin/migctl
    - --socket
    - {{ .Values.config.api.socket | quote }}
    - status
    - -o
    - json
{{- end }}
