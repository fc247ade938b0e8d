{{/* The pod both the server and the workers run: same image, settings, secrets and
     security; `args` and `probes` differ. Called with (dict "root" $ "component" ...
     "args" (list ...) "probes" bool "resources" ...). */}}
{{- define "runbook-bot.pod" -}}
{{- $root := .root -}}
{{- $values := $root.Values -}}
{{- $secret := include "runbook-bot.secretName" $root -}}
metadata:
  labels:
    {{- include "runbook-bot.selectorLabels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ .component }}
    {{- with $values.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  annotations:
    checksum/config: {{ include "runbook-bot.settings" $root | sha256sum }}
    checksum/runbooks: {{ toYaml $values.runbooks | sha256sum }}
    {{- with $values.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  serviceAccountName: {{ include "runbook-bot.serviceAccountName" $root }}
  automountServiceAccountToken: true
  {{- with $values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $values.priorityClassName }}
  priorityClassName: {{ . }}
  {{- end }}
  securityContext:
    {{- include "runbook-bot.podSecurityContext" $root | nindent 4 }}
  affinity:
    {{- if $values.affinity }}
    {{- toYaml $values.affinity | nindent 4 }}
    {{- else }}
    podAntiAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
        - weight: 100
          podAffinityTerm:
            topologyKey: kubernetes.io/hostname
            labelSelector:
              matchLabels:
                {{- include "runbook-bot.selectorLabels" $root | nindent 16 }}
                app.kubernetes.io/component: {{ .component }}
    {{- end }}
  {{- with $values.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $values.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  containers:
    - name: {{ .component }}
      image: {{ include "runbook-bot.image" $root }}
      imagePullPolicy: {{ $values.image.pullPolicy }}
      args:
        {{- toYaml .args | nindent 8 }}
      env:
        - name: RUNBOOK_BOT_CONFIG
          value: /etc/runbook-bot/config/config.yaml
        {{- include "runbook-bot.databaseEnv" $root | nindent 8 }}
        {{- include "runbook-bot.layoutEnv" $root | nindent 8 }}
      {{- if .probes }}
      ports:
        - name: http
          containerPort: {{ $values.service.port }}
          protocol: TCP
      startupProbe:
        httpGet: {path: /healthz, port: http}
        periodSeconds: 2
        failureThreshold: 30
      livenessProbe:
        httpGet: {path: /healthz, port: http}
        periodSeconds: 10
        timeoutSeconds: 3
        failureThreshold: 3
      # Not the timers check: a stalled worker must not also take the webhook out of
      # service (docs/escalation.md); alert on runbook_bot_timers_late_seconds instead.
      readinessProbe:
        httpGet: {path: "/readyz?exclude=timers", port: http}
        periodSeconds: 5
        timeoutSeconds: 3
        failureThreshold: 3
      {{- end }}
      securityContext:
        {{- include "runbook-bot.containerSecurityContext" $root | nindent 8 }}
      resources:
        {{- toYaml .resources | nindent 8 }}
      volumeMounts:
        - name: tmp
          mountPath: /tmp
        - name: config
          mountPath: /etc/runbook-bot/config
          readOnly: true
        {{- if or $values.runbooks.files $values.runbooks.existingConfigMap }}
        - name: runbooks
          mountPath: /etc/runbook-bot/runbooks
          readOnly: true
        {{- end }}
        - name: secrets
          mountPath: {{ include "runbook-bot.secretsDir" $root }}
          readOnly: true
  volumes:
    - name: tmp
      emptyDir:
        sizeLimit: 256Mi
    - name: config
      configMap:
        name: {{ include "runbook-bot.fullname" $root }}
    {{- if or $values.runbooks.files $values.runbooks.existingConfigMap }}
    - name: runbooks
      configMap:
        name: {{ $values.runbooks.existingConfigMap | default (printf "%s-runbooks" (include "runbook-bot.fullname" $root)) }}
    {{- end }}
    - name: secrets
      projected:
        defaultMode: 0440
        sources:
          - secret:
              name: {{ $values.webhook.existingSecret | default $secret }}
              items:
                - key: {{ ternary "token" "webhook-token" (not (empty $values.webhook.existingSecret)) }}
                  path: webhook/token
          {{- if $values.slack.enabled }}
          {{- $own := empty $values.slack.existingSecret }}
          - secret:
              name: {{ $values.slack.existingSecret | default $secret }}
              items:
                - key: {{ ternary "slack-bot-token" "bot-token" $own }}
                  path: slack/bot-token
                {{- if eq $values.slack.mode "socket" }}
                - key: {{ ternary "slack-app-token" "app-token" $own }}
                  path: slack/app-token
                {{- else }}
                - key: {{ ternary "slack-signing-secret" "signing-secret" $own }}
                  path: slack/signing-secret
                {{- end }}
          {{- end }}
          {{- range $profile, $login := $values.bmc.credentials }}
          - secret:
              name: {{ $login.existingSecret | default $secret }}
              items:
                - key: {{ ternary (printf "bmc-%s" $profile) ($login.existingSecretKey | default "password") (empty $login.existingSecret) }}
                  path: bmc/{{ $profile }}
          {{- end }}
          - secret:
              name: {{ $values.logKey.existingSecret | default $secret }}
              items:
                - key: {{ ternary "log-key" ($values.logKey.existingSecretKey | default "log-key") (empty $values.logKey.existingSecret) }}
                  path: log/key
          {{- $ownConsole := empty $values.console.existingSecret }}
          - secret:
              name: {{ $values.console.existingSecret | default $secret }}
              items:
                - key: {{ ternary "console-session-secret" "session-secret" $ownConsole }}
                  path: console/session-secret
                {{- if or $values.console.adminToken (not $ownConsole) }}
                - key: {{ ternary "console-admin-token" "admin-token" $ownConsole }}
                  path: console/admin-token
                {{- end }}
{{- end -}}
