{{/*
Shared pieces of the fleet's children. Every child carries the fleet UID label: it is both the
selector of the fleet's Pods and the operator's proof that it owns the object.
*/}}

{{- define "celld-fleet.uidLabel" -}}
celld.eric.dev/fleet-uid: {{ .Values.fleet.uid | quote }}
{{- end }}

{{- define "celld-fleet.labels" -}}
{{ include "celld-fleet.uidLabel" . }}
app.kubernetes.io/managed-by: celld-operator
app.kubernetes.io/part-of: celld
app.kubernetes.io/instance: {{ .Values.fleet.name | quote }}
{{- end }}

{{/* metadata takes (dict "root" $ "name" NAME). */}}
{{- define "celld-fleet.metadata" -}}
name: {{ .name | quote }}
namespace: {{ .root.Values.fleet.namespace | quote }}
labels:
  {{- include "celld-fleet.labels" .root | nindent 2 }}
{{- end }}

{{/* meshInvolved: the fleet wants the mesh, or left it and proxies still run (remembered+mixed). */}}
{{- define "celld-fleet.meshInvolved" -}}
{{- $o := .Values.operator -}}
{{- if or .Values.mesh.enabled (and $o.meshRemembered $o.meshMixed) }}true{{ end -}}
{{- end }}

{{/* meshMixed counts only for a fleet the mesh concerns: a fleet that never opted in keeps
whatever the namespace's own injection does, and the operator stays out of it. */}}
{{- define "celld-fleet.meshMixed" -}}
{{- $o := .Values.operator -}}
{{- if and $o.meshMixed (or .Values.mesh.enabled $o.meshRemembered) }}true{{ end -}}
{{- end }}

{{/* egressRule renders one scoped TCP rule from an egress target: a cidr, or labelled Pods in
the fleet namespace or in the named one. */}}
{{- define "celld-fleet.egressRule" -}}
- ports:
  {{- range .ports }}
  - protocol: TCP
    port: {{ . }}
  {{- end }}
  to:
  {{- if .cidr }}
  - ipBlock:
      cidr: {{ .cidr | quote }}
  {{- else }}
  - podSelector:
      matchLabels:
        {{- toYaml .podLabels | nindent 8 }}
    {{- if .namespace }}
    namespaceSelector:
      matchLabels:
        kubernetes.io/metadata.name: {{ .namespace | quote }}
    {{- end }}
  {{- end }}
{{- end }}
