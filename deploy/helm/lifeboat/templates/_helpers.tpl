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
{{- default (include "lifeboat.fullname" .) .Values.leaderElection.leaseName -}}
{{- end -}}

{{/* The failover journal's ConfigMaps (--failover-journal): <lease>-inflight-0 to -3. */}}
{{- define "lifeboat.journalNames" -}}
{{- $lease := include "lifeboat.leaseName" . -}}
{{- $names := list -}}
{{- range $i := until 4 -}}
{{- $names = append $names (printf "%s-inflight-%d" $lease $i | quote) -}}
{{- end -}}
{{- join ", " $names -}}
{{- end -}}

{{- define "lifeboat.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* flag emits the environment variable of lifeboat's flag --name
(LIFEBOAT_NAME) when value is set (not null, not ""). */}}
{{- define "lifeboat.flag" -}}
{{- $v := index . 1 -}}
{{- if not (or (kindIs "invalid" $v) (and (kindIs "string" $v) (eq $v ""))) }}
- name: {{ printf "LIFEBOAT_%s" (index . 0 | replace "-" "_" | upper) }}
  value: {{ printf "%v" $v | quote }}
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

{{/* lifeboat's configuration, as LIFEBOAT_* environment variables (so that
`kubectl exec ... -- lifeboat check` sees the same configuration as the
running process). Only options that apply to the mode are set (lifeboat
refuses the others). */}}
{{- define "lifeboat.settings" -}}
{{- $mode := include "lifeboat.mode" . -}}
{{- include "lifeboat.flag" (list "mode" $mode) }}
{{- include "lifeboat.flag" (list "listen" (printf ":%v" .Values.port)) }}
{{- include "lifeboat.flag" (list "dry-run" .Values.dryRun) }}
{{- $drainOn := include "lifeboat.drainOn" . }}
{{- if and (ne $drainOn "<default>") (ne $drainOn "") }}
- name: LIFEBOAT_DRAIN_ON
  value: {{ $drainOn | quote }}
{{- end }}
{{- include "lifeboat.flag" (list "scheduled-change-lead" .Values.scheduledChangeLead) }}
{{- include "lifeboat.flag" (list "maintenance-windows" .Values.maintenanceWindows) }}
{{- if .Values.forceDeleteAtDeadline }}
{{- include "lifeboat.flag" (list "force-delete-at-deadline" true) }}
{{- end }}
{{- if eq .Values.deleteBlockedPodsBeforeDeadline false }}
{{- include "lifeboat.flag" (list "delete-blocked-pods-before-deadline" false) }}
{{- end }}
{{- if eq .Values.annotatePodsWithDeadline false }}
{{- include "lifeboat.flag" (list "annotate-pods-with-deadline" false) }}
{{- end }}
{{- if .Values.terminatingCondition }}
{{- include "lifeboat.flag" (list "terminating-condition" true) }}
{{- end }}
{{- if .Values.planWithKubeletShutdown }}
{{- include "lifeboat.flag" (list "plan-with-kubelet-shutdown" true) }}
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
{{- include "lifeboat.nodeWriteSettings" . }}
{{- if eq $mode "queue" }}
{{- if .Values.imdsCompleteLifecycle }}
{{- fail "imdsCompleteLifecycle applies only in imds mode (mode is queue): queue mode completes lifecycle actions with completeLifecycle" }}
{{- end }}
{{- include "lifeboat.flag" (list "queue-url" (required "queueURL is required in queue mode (the SQS queue of deploy/aws/lifeboat.cfn.json)" .Values.queueURL)) }}
{{- include "lifeboat.flag" (list "region" .Values.awsRegion) }}
{{- include "lifeboat.flag" (list "aws-endpoint" .Values.awsEndpoint) }}
{{- include "lifeboat.flag" (list "cluster-name" .Values.clusterName) }}
{{- if .Values.managedASGs }}
{{- include "lifeboat.flag" (list "managed-asg" (join "," .Values.managedASGs)) }}
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
{{- include "lifeboat.flag" (list "scale-in-protection" .Values.scaleInProtection) }}
{{- include "lifeboat.flag" (list "node-selector" .Values.nodeScope) }}
{{- include "lifeboat.flag" (list "karpenter-nodes" .Values.karpenterNodes) }}
{{- include "lifeboat.flag" (list "volume-detach-timeout" .Values.volumeDetachTimeout) }}
{{- if .Values.deleteGhostNodes }}
{{- include "lifeboat.flag" (list "delete-ghost-nodes" true) }}
{{- end }}
{{- if .Values.replacementFirst }}
{{- include "lifeboat.flag" (list "replacement-first" true) }}
{{- end }}
{{- range .Values.extraArgs }}
{{- if regexMatch "^--?failover-journal(=|$)" (toString .) }}
{{- fail (printf "extraArgs sets %s: set leaderElection.failoverJournal instead, which also grants the journal's ConfigMaps" (toString .)) }}
{{- end }}
{{- if and (regexMatch "^--?lease-(name|namespace)(=|$)" (toString .)) (not (regexMatch (printf "^--?lease-namespace=%s$" (regexQuoteMeta $.Release.Namespace)) (toString .))) }}
{{- fail (printf "extraArgs sets %s: the chart's Role grants only the Lease leaderElection.leaseName in the release namespace; set leaderElection.leaseName instead" (toString .)) }}
{{- end }}
{{- end }}
{{- range $e := .Values.extraEnv }}
{{- if eq (toString $e.name) "LIFEBOAT_FAILOVER_JOURNAL" }}
{{- fail "extraEnv sets LIFEBOAT_FAILOVER_JOURNAL: set leaderElection.failoverJournal instead, which also grants the journal's ConfigMaps" }}
{{- end }}
{{- if or (eq (toString $e.name) "LIFEBOAT_LEASE_NAME") (and (eq (toString $e.name) "LIFEBOAT_LEASE_NAMESPACE") (ne (toString $e.value) $.Release.Namespace)) }}
{{- fail (printf "extraEnv sets %s: the chart's Role grants only the Lease leaderElection.leaseName in the release namespace; set leaderElection.leaseName instead" $e.name) }}
{{- end }}
{{- end }}
{{- include "lifeboat.flag" (list "leader-elect" .Values.leaderElection.enabled) }}
{{- if .Values.leaderElection.enabled }}
{{- include "lifeboat.flag" (list "lease-name" (include "lifeboat.leaseName" .)) }}
{{- include "lifeboat.flag" (list "lease-duration" .Values.leaderElection.leaseDuration) }}
{{- include "lifeboat.flag" (list "failover-journal" .Values.leaderElection.failoverJournal) }}
{{- end }}
{{- else }}
{{- if and .Values.awsEndpoint (not .Values.imdsCompleteLifecycle) }}
{{- fail "awsEndpoint applies only in queue mode, or in imds mode with imdsCompleteLifecycle (mode is imds)" }}
{{- end }}
{{- range $k, $v := dict "queueURL" .Values.queueURL "clusterName" .Values.clusterName "visibilityTimeout" .Values.visibilityTimeout "unknownInstance" .Values.unknownInstance "lifecycleTimeoutResult" .Values.lifecycleTimeoutResult "launchReadyTimeout" .Values.launchReadyTimeout "launchTimeoutResult" .Values.launchTimeoutResult "nodeScope" .Values.nodeScope "karpenterNodes" .Values.karpenterNodes "volumeDetachTimeout" .Values.volumeDetachTimeout "deleteGhostNodes" .Values.deleteGhostNodes "replacementFirst" .Values.replacementFirst }}
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
{{- if .Values.imdsCompleteLifecycle }}
{{- include "lifeboat.flag" (list "imds-complete-lifecycle" true) }}
{{- include "lifeboat.flag" (list "region" .Values.awsRegion) }}
{{- include "lifeboat.flag" (list "aws-endpoint" .Values.awsEndpoint) }}
{{- end }}
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
{{- with .Values.daemonsetGoGC }}
- name: GOGC
  value: {{ . | quote }}
{{- end }}
{{- with .Values.daemonsetGoMemLimit }}
- name: GOMEMLIMIT
  value: {{ . | quote }}
{{- end }}
{{- with .Values.daemonsetGoMaxProcs }}
- name: GOMAXPROCS
  value: {{ . | quote }}
{{- end }}
{{- end }}
{{- include "lifeboat.settings" . }}
{{- include "lifeboat.webhookEnv" . }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The pod's container, shared by the Deployment and the DaemonSet. */}}
{{- define "lifeboat.container" -}}
- name: lifeboat
  image: {{ include "lifeboat.image" . | quote }}
  imagePullPolicy: {{ .Values.image.pullPolicy }}
  {{- with include "lifeboat.daemonsetCommand" . }}
  command: {{ . }}
  {{- end }}
  args:
    - run
    {{- if eq (include "lifeboat.drainOn" .) "" }}
    {{- /* Nothing drains: an empty variable would mean "unset", a flag does not. */}}
    - "--drain-on="
    {{- end }}
    {{- range .Values.extraArgs }}
    - {{ . | quote }}
    {{- end }}
  env:
    {{- include "lifeboat.env" . | nindent 4 }}
  ports:
    - name: http
      containerPort: {{ .Values.port }}
      protocol: TCP
  {{- /* Each probe is a new connection to an otherwise idle process (about
  0.33 ms of CPU on the DaemonSet, docs/benchmarks.md), so a running pod is
  probed seldom. A starting pod is probed every second until /readyz
  answers: the kubelet then probes readiness at once (it does so for a
  started container not yet ready), so a rolling update does not wait for
  the readiness period. A pod that is not ready within 5 minutes is
  restarted. */}}
  startupProbe:
    httpGet:
      path: /readyz
      port: http
    periodSeconds: 1
    failureThreshold: 300
  livenessProbe:
    httpGet:
      path: /healthz
      port: http
    periodSeconds: 20
    failureThreshold: 3
  readinessProbe:
    httpGet:
      path: /readyz
      port: http
    periodSeconds: 15
    failureThreshold: 2
  {{- with .Values.securityContext }}
  securityContext:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.resources }}
  resources:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end -}}

{{/* The node named in the requester's pod-bound service-account token
(claim kubernetes.io.node.name, Kubernetes 1.30+), as admission sees it;
"" when the token carries none. A variable of the node-scope policies. */}}
{{- define "lifeboat.nodeClaim" -}}
- name: nodeName
  expression: >-
    has(request.userInfo.extra) && ('authentication.kubernetes.io/node-name' in request.userInfo.extra) &&
    size(request.userInfo.extra['authentication.kubernetes.io/node-name']) == 1
    ? request.userInfo.extra['authentication.kubernetes.io/node-name'][0] : ''
{{- end -}}

{{/* The first validation of each node-scope policy: a token without a node
claim may write nothing. */}}
{{- define "lifeboat.nodeClaimRequired" -}}
- expression: "variables.nodeName != ''"
  reason: Forbidden
  message: "lifeboat in IMDS mode writes only with the token the kubelet mounts in its pod, which names the pod's node (authentication.kubernetes.io/node-name); this request's token names no node"
{{- end -}}

{{/* Webhook settings, from NTH's value names. The URL and headers are
secrets: a Secret is preferred for the URL (key webhookurl, as NTH). */}}
{{- define "lifeboat.webhookEnv" -}}
{{- if and .Values.webhookURL .Values.webhookURLSecretName }}
{{- fail "webhookURL and webhookURLSecretName: set one" }}
{{- end }}
{{- with .Values.webhookURLSecretName }}
- name: LIFEBOAT_WEBHOOK_URL
  valueFrom:
    secretKeyRef:
      name: {{ . | quote }}
      key: webhookurl
{{- end }}
{{- with .Values.webhookURL }}
- name: LIFEBOAT_WEBHOOK_URL
  value: {{ . | quote }}
{{- end }}
{{- with .Values.webhookHeaders }}
- name: LIFEBOAT_WEBHOOK_HEADERS
  value: {{ $lines := list }}{{ range $k, $v := fromJson . }}{{ $lines = append $lines (printf "%s: %v" $k $v) }}{{ end }}{{ join "\n" $lines | quote }}
{{- end }}
{{- with .Values.kubernetesEventsExtraAnnotations }}
- name: LIFEBOAT_EVENTS_ANNOTATIONS
  value: {{ . | quote }}
{{- end }}
{{- with .Values.webhookProxy }}
- name: LIFEBOAT_WEBHOOK_PROXY
  value: {{ . | quote }}
{{- end }}
{{- with .Values.webhookTemplate }}
- name: LIFEBOAT_WEBHOOK_TEMPLATE
  value: {{ . | quote }}
{{- end }}
{{- end -}}

{{/* The pod's image pull secrets: imagePullSecrets ({name: ...}) and NTH's
image.pullSecrets (names). */}}
{{- define "lifeboat.imagePullSecrets" -}}
{{- range .Values.imagePullSecrets }}
- {{ toYaml . | nindent 2 | trim }}
{{- end }}
{{- range .Values.image.pullSecrets }}
- name: {{ . | quote }}
{{- end }}
{{- end -}}


{{/* The DaemonSet's command (JSON; empty: the image's entrypoint,
lifeboat). lifeboat-imds has no Auto Scaling client: with
imdsCompleteLifecycle the default command gives way to the entrypoint. */}}
{{- define "lifeboat.daemonsetCommand" -}}
{{- $cmd := .Values.daemonsetCommand }}
{{- if and (eq (include "lifeboat.mode" .) "imds") $cmd }}
{{- if not (and .Values.imdsCompleteLifecycle (eq (base (first $cmd)) "lifeboat-imds")) }}
{{- toJson $cmd }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The options that decide what lifeboat writes on a node besides
cordon, lifeboat.io/ taints and annotations: chart values, because the
own-node policy (nodescope.yaml) is rendered from them. */}}
{{- define "lifeboat.nodeWriteSettings" -}}
{{- include "lifeboat.flag" (list "taint-effect" .Values.taintEffect) }}
{{- if .Values.excludeFromLoadBalancers }}
{{- include "lifeboat.flag" (list "exclude-from-load-balancers" true) }}
{{- end }}
{{- if .Values.enableOutOfServiceTaint }}
{{- if eq (include "lifeboat.mode" .) "imds" }}
{{- fail "enableOutOfServiceTaint (--out-of-service-taint) is refused with mode=imds (--mode imds): the taint says the node is shut down, and a pod on the dying instance cannot confirm that; use mode=queue" }}
{{- end }}
{{- include "lifeboat.flag" (list "out-of-service-taint" true) }}
{{- end }}
{{- end -}}

{{/* The effect of lifeboat's taints: taintEffect, or lifeboat's default
(--taint-effect, NoSchedule; TestOptionsMatrix holds the two equal). */}}
{{- define "lifeboat.taintEffect" -}}
{{- default "NoSchedule" .Values.taintEffect -}}
{{- end -}}

{{/* With the own-node policy, the options it is rendered from may be set
only through their values: set in extraArgs or extraEnv (or through an
aws-node-termination-handler variable), lifeboat would write what the
policy refuses, and retry for ever. */}}
{{- define "lifeboat.nodeWriteArgsRefused" -}}
{{- $values := dict "taint-effect" "taintEffect" "exclude-from-load-balancers" "excludeFromLoadBalancers" "out-of-service-taint" "enableOutOfServiceTaint" "terminating-condition" "terminatingCondition" }}
{{- $env := dict "TAINT_EFFECT" "taintEffect" "EXCLUDE_FROM_LOAD_BALANCERS" "excludeFromLoadBalancers" "ENABLE_OUT_OF_SERVICE_TAINT" "enableOutOfServiceTaint" }}
{{- range $flag, $value := $values }}
{{- $_ := set $env (printf "LIFEBOAT_%s" ($flag | replace "-" "_" | upper)) $value }}
{{- range $.Values.extraArgs }}
{{- if regexMatch (printf "^--?%s(=|$)" $flag) (toString .) }}
{{- fail (printf "extraArgs sets --%s: with rbac.nodeScoped the own-node policy is rendered from the value %s; set %s instead" $flag $value $value) }}
{{- end }}
{{- end }}
{{- end }}
{{- range $e := $.Values.extraEnv }}
{{- with get $env (toString $e.name) }}
{{- fail (printf "extraEnv sets %s: with rbac.nodeScoped the own-node policy is rendered from the value %s; set %s instead" $e.name . .) }}
{{- end }}
{{- end }}
{{- end -}}
