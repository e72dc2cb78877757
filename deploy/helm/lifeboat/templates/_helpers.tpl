{{/* Names and labels. */}}
{{- define "lifeboat.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "lifeboat.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "lifeboat.selectorLabels" -}}
app.kubernetes.io/name: {{ include "lifeboat.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "lifeboat.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "lifeboat.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: {{ include "lifeboat.mode" . }}
{{- with .Values.customLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "lifeboat.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "lifeboat.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The mode: mode, or NTH's enableSqsTerminationDraining, or queue. A
contradiction between the two is an error, never a guess. */}}
{{- define "lifeboat.mode" -}}
{{- $m := .Values.mode -}}
{{- if not (kindIs "invalid" .Values.enableSqsTerminationDraining) -}}
{{- $nth := ternary "queue" "imds" .Values.enableSqsTerminationDraining -}}
{{- if and $m (ne $m $nth) -}}
{{- fail (printf "mode=%s contradicts enableSqsTerminationDraining=%v (which means mode=%s): set only one" $m .Values.enableSqsTerminationDraining $nth) -}}
{{- end -}}
{{- $m = $nth -}}
{{- end -}}
{{- default "queue" $m -}}
{{- end -}}

{{/* The lease holding leadership: its name is also a resourceName of the Role. */}}
{{- define "lifeboat.leaseName" -}}
{{- include "lifeboat.fullname" . -}}
{{- end -}}

{{- define "lifeboat.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* flag emits "--name=value" as a YAML list item when value is set (not
null, not ""). */}}
{{- define "lifeboat.flag" -}}
{{- $v := index . 1 -}}
{{- if not (or (kindIs "invalid" $v) (and (kindIs "string" $v) (eq $v ""))) }}
- {{ printf "--%s=%v" (index . 0) $v | quote }}
{{- end -}}
{{- end -}}

{{/* The kinds that drain, from drainOn and NTH's cordonOnly /
enableRebalanceDraining; null when lifeboat's default applies. */}}
{{- define "lifeboat.drainOn" -}}
{{- if .Values.cordonOnly -}}
{{- if or .Values.drainOn .Values.enableRebalanceDraining -}}
{{- fail "cordonOnly=true drains nothing: it cannot be combined with drainOn or enableRebalanceDraining" -}}
{{- end -}}
{{- "" -}}
{{- else if not (kindIs "invalid" .Values.drainOn) -}}
{{- $kinds := .Values.drainOn -}}
{{- if and .Values.enableRebalanceDraining (not (has "rebalance-recommendation" $kinds)) -}}
{{- $kinds = append $kinds "rebalance-recommendation" -}}
{{- end -}}
{{- join "," $kinds -}}
{{- else if .Values.enableRebalanceDraining -}}
{{- "spot-interruption,scheduled-change,state-change,capacity-reservation-interruption,lifecycle-terminate,rebalance-recommendation" -}}
{{- else -}}
{{- "<default>" -}}
{{- end -}}
{{- end -}}

{{/* The container's arguments. Only options that apply to the mode are
passed (lifeboat refuses the others). */}}
{{- define "lifeboat.args" -}}
{{- $mode := include "lifeboat.mode" . -}}
- run
- {{ printf "--mode=%s" $mode | quote }}
{{- include "lifeboat.flag" (list "listen" (printf ":%v" .Values.port)) }}
{{- include "lifeboat.flag" (list "dry-run" .Values.dryRun) }}
{{- $drainOn := include "lifeboat.drainOn" . }}
{{- if ne $drainOn "<default>" }}
- {{ printf "--drain-on=%s" $drainOn | quote }}
{{- end }}
{{- include "lifeboat.flag" (list "scheduled-change-lead" .Values.scheduledChangeLead) }}
{{- if .Values.forceDeleteAtDeadline }}
- "--force-delete-at-deadline=true"
{{- end }}
{{- include "lifeboat.flag" (list "deadline-margin" .Values.deadlineMargin) }}
{{- include "lifeboat.flag" (list "eviction-backoff" .Values.evictionBackoff) }}
{{- include "lifeboat.flag" (list "log-level" .Values.logLevel) }}
{{- $logFormat := .Values.logFormat }}
{{- if not (kindIs "invalid" .Values.jsonLogging) }}
{{- $nth := ternary "json" "text" .Values.jsonLogging }}
{{- if and $logFormat (ne $logFormat $nth) }}
{{- fail (printf "logFormat=%s contradicts jsonLogging=%v: set only one" $logFormat .Values.jsonLogging) }}
{{- end }}
{{- $logFormat = $nth }}
{{- end }}
{{- include "lifeboat.flag" (list "log-format" $logFormat) }}
{{- if eq $mode "queue" }}
{{- include "lifeboat.flag" (list "queue-url" (required "queueURL is required in queue mode (the SQS queue of deploy/aws/lifeboat.cfn.json)" .Values.queueURL)) }}
{{- include "lifeboat.flag" (list "region" .Values.awsRegion) }}
{{- include "lifeboat.flag" (list "aws-endpoint" .Values.awsEndpoint) }}
{{- include "lifeboat.flag" (list "cluster-name" .Values.clusterName) }}
{{- if .Values.managedASGs }}
- {{ printf "--managed-asg=%s" (join "," .Values.managedASGs) | quote }}
{{- end }}
{{- include "lifeboat.flag" (list "workers" .Values.workers) }}
{{- include "lifeboat.flag" (list "visibility-timeout" .Values.visibilityTimeout) }}
{{- $unknown := .Values.unknownInstance }}
{{- if not (kindIs "invalid" .Values.deleteSqsMsgIfNodeNotFound) }}
{{- $nth := ternary "delete" "leave" .Values.deleteSqsMsgIfNodeNotFound }}
{{- if and $unknown (ne $unknown $nth) }}
{{- fail (printf "unknownInstance=%s contradicts deleteSqsMsgIfNodeNotFound=%v: set only one" $unknown .Values.deleteSqsMsgIfNodeNotFound) }}
{{- end }}
{{- $unknown = $nth }}
{{- end }}
{{- include "lifeboat.flag" (list "unknown-instance" $unknown) }}
{{- include "lifeboat.flag" (list "private-dns-lookup" .Values.privateDNSLookup) }}
{{- include "lifeboat.flag" (list "complete-lifecycle" .Values.completeLifecycle) }}
{{- $hb := .Values.heartbeatInterval }}
{{- if or (kindIs "float64" $hb) (kindIs "int64" $hb) (kindIs "int" $hb) }}
{{- $hb = printf "%ds" (int $hb) }}
{{- end }}
{{- include "lifeboat.flag" (list "heartbeat-interval" $hb) }}
{{- include "lifeboat.flag" (list "lifecycle-timeout-result" .Values.lifecycleTimeoutResult) }}
{{- include "lifeboat.flag" (list "launch-ready-timeout" .Values.launchReadyTimeout) }}
{{- include "lifeboat.flag" (list "launch-timeout-result" .Values.launchTimeoutResult) }}
- {{ printf "--leader-elect=%v" .Values.leaderElection.enabled | quote }}
{{- if .Values.leaderElection.enabled }}
- {{ printf "--lease-name=%s" (include "lifeboat.leaseName" .) | quote }}
{{- include "lifeboat.flag" (list "lease-duration" .Values.leaderElection.leaseDuration) }}
{{- end }}
{{- else }}
{{- range $k, $v := dict "queueURL" .Values.queueURL "awsEndpoint" .Values.awsEndpoint "clusterName" .Values.clusterName "visibilityTimeout" .Values.visibilityTimeout "unknownInstance" .Values.unknownInstance "lifecycleTimeoutResult" .Values.lifecycleTimeoutResult "launchReadyTimeout" .Values.launchReadyTimeout "launchTimeoutResult" .Values.launchTimeoutResult }}
{{- if $v }}
{{- fail (printf "%s applies only in queue mode (mode is imds)" $k) }}
{{- end }}
{{- end }}
{{- range $k, $v := dict "workers" .Values.workers "deleteSqsMsgIfNodeNotFound" .Values.deleteSqsMsgIfNodeNotFound "privateDNSLookup" .Values.privateDNSLookup "completeLifecycle" .Values.completeLifecycle "heartbeatInterval" .Values.heartbeatInterval }}
{{- if not (kindIs "invalid" $v) }}
{{- fail (printf "%s applies only in queue mode (mode is imds): instance metadata gives no lifecycle action token or queue" $k) }}
{{- end }}
{{- end }}
{{- if .Values.managedASGs }}
{{- fail "managedASGs applies only in queue mode (mode is imds)" }}
{{- end }}
{{- include "lifeboat.flag" (list "imds-endpoint" .Values.instanceMetadataURL) }}
{{- include "lifeboat.flag" (list "imds-poll-interval" .Values.imdsPollInterval) }}
{{- include "lifeboat.flag" (list "imds-allow-v1" .Values.imdsAllowV1) }}
{{- end }}
{{- range .Values.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end -}}

{{/* The container's environment: lifeboat's own pod (never evicted by
itself) and, in imds mode, its node, from the downward API. */}}
{{- define "lifeboat.env" -}}
- name: LIFEBOAT_POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: LIFEBOAT_POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
{{- if eq (include "lifeboat.mode" .) "imds" }}
- name: LIFEBOAT_NODE_NAME
  valueFrom:
    fieldRef:
      fieldPath: spec.nodeName
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The pod's container, shared by the Deployment and the DaemonSet. */}}
{{- define "lifeboat.container" -}}
- name: lifeboat
  image: {{ include "lifeboat.image" . | quote }}
  imagePullPolicy: {{ .Values.image.pullPolicy }}
  args:
    {{- include "lifeboat.args" . | nindent 4 }}
  env:
    {{- include "lifeboat.env" . | nindent 4 }}
  ports:
    - name: http
      containerPort: {{ .Values.port }}
      protocol: TCP
  livenessProbe:
    httpGet:
      path: /healthz
      port: http
    periodSeconds: 10
    failureThreshold: 3
  readinessProbe:
    httpGet:
      path: /readyz
      port: http
    periodSeconds: 5
  {{- with .Values.securityContext }}
  securityContext:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.resources }}
  resources:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end -}}
