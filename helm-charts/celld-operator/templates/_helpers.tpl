{{/* The operator is a cluster singleton: its objects are named celld-operator, not after the
release. nameOverride and fullnameOverride both replace that name (fullnameOverride wins); the
chart accepts both because parent charts commonly set nameOverride on every dependency. */}}
{{- define "celld-operator.fullname" -}}
{{- .Values.fullnameOverride | default .Values.nameOverride | default "celld-operator" -}}
{{- end -}}

{{/* The ServiceAccount the operator runs as and every binding names: the chart's own, or an
existing one (serviceAccount.create=false). Never "default": the operator's rights would go to
every Pod of the namespace that uses it. */}}
{{- define "celld-operator.serviceAccountName" -}}
{{- .Values.serviceAccount.name | default (include "celld-operator.fullname" .) -}}
{{- end -}}

{{/* Labels of every object: commonLabels, then the chart's own (values.schema.json refuses
commonLabels and podLabels that would redefine one of these). */}}
{{- define "celld-operator.labels" -}}
{{- with .Values.commonLabels }}
{{- toYaml . }}
{{ end -}}
{{ include "celld-operator.chartLabels" . }}
{{- end -}}

{{- define "celld-operator.chartLabels" -}}
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
