{{/* The operator is a cluster singleton: its objects are named celld-operator, not after the release. */}}
{{- define "celld-operator.fullname" -}}
{{- .Values.fullnameOverride | default "celld-operator" -}}
{{- end -}}

{{- define "celld-operator.labels" -}}
app.kubernetes.io/name: celld-operator
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Fleet NetworkPolicies admit port 8081 from Pods with this label: keep it exact. */}}
{{- define "celld-operator.selectorLabels" -}}
app.kubernetes.io/name: celld-operator
{{- end -}}

{{- define "celld-operator.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}
