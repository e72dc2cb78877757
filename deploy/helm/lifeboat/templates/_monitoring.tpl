{{/* Prometheus Operator objects (servicemonitor.yaml, podmonitor.yaml,
prometheusrule.yaml). */}}

{{/* The labels of a monitoring object: the chart's, then the object's
labels (NTH's name) and additionalLabels (kube-prometheus-stack's), where
a Prometheus' selector finds them (release: <its release>). Call with
(list $ .Values.serviceMonitor). */}}
{{- define "lifeboat.monitoringLabels" -}}
{{- $root := index . 0 }}
{{- $v := index . 1 }}
{{- include "lifeboat.labels" $root }}
{{- with merge (deepCopy ($v.additionalLabels | default dict)) ($v.labels | default dict) }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The scrape settings shared by the ServiceMonitor's endpoint and the
PodMonitor's podMetricsEndpoint. */}}
{{- define "lifeboat.scrapeEndpoint" -}}
port: http
path: /metrics
{{- with .interval }}
interval: {{ . }}
{{- end }}
{{- with .scrapeTimeout }}
scrapeTimeout: {{ . }}
{{- end }}
{{- end -}}
