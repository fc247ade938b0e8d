{{/* Names, labels and the settings file shared by the templates. */}}

{{- define "runbook-bot.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "runbook-bot.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "runbook-bot.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "runbook-bot.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "runbook-bot.selectorLabels" -}}
app.kubernetes.io/name: {{ include "runbook-bot.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "runbook-bot.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "runbook-bot.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "runbook-bot.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "runbook-bot.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name: name the existing service account when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "runbook-bot.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* Where node Jobs (nvidia-smi, dcgmi, ibstat) run: the Role is granted there. */}}
{{- define "runbook-bot.nodeJobNamespace" -}}
{{- default .Release.Namespace .Values.nodeJobs.namespace -}}
{{- end -}}

{{- define "runbook-bot.secretsDir" -}}/var/run/secrets/runbook-bot{{- end -}}

{{/* The chart's own Secret, or the existing one a value names. */}}
{{- define "runbook-bot.secretName" -}}
{{- include "runbook-bot.fullname" . -}}
{{- end -}}

{{/* The database URL: composed from host, port, name and user; the password reaches
     libpq through PGPASSWORD, never the URL or the ConfigMap. */}}
{{- define "runbook-bot.databaseUrl" -}}
{{- $db := .Values.database -}}
{{- $url := printf "postgresql+psycopg://%s@%s:%d/%s" (required "database.user: set the PostgreSQL user" $db.user) (required "database.host: set the PostgreSQL host (an existing database; see the chart README)" $db.host) (int $db.port) (required "database.name: set the database name" $db.name) -}}
{{- if $db.sslmode -}}
{{- $url = printf "%s?sslmode=%s" $url $db.sslmode -}}
{{- end -}}
{{- $url -}}
{{- end -}}

{{- define "runbook-bot.databasePasswordSecret" -}}
{{- if .Values.database.existingSecret -}}
{{- .Values.database.existingSecret -}}
{{- else -}}
{{- printf "%s-database" (include "runbook-bot.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/* The owner role's URL: the migrations Job's `database_migration_url`. */}}
{{- define "runbook-bot.ownerDatabaseUrl" -}}
{{- $db := .Values.database -}}
{{- $url := printf "postgresql+psycopg://%s@%s:%d/%s" $db.owner.user $db.host (int $db.port) $db.name -}}
{{- if $db.sslmode -}}
{{- $url = printf "%s?sslmode=%s" $url $db.sslmode -}}
{{- end -}}
{{- $url -}}
{{- end -}}

{{- define "runbook-bot.ownerPasswordSecret" -}}
{{- if .Values.database.owner.existingSecret -}}
{{- .Values.database.owner.existingSecret -}}
{{- else -}}
{{- printf "%s-database-owner" (include "runbook-bot.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/* Environment of the migrations Job: the runtime URL names the role to grant; the
     owner's URL and password are what it connects with. One role (owner.user empty):
     the runtime role migrates. */}}
{{- define "runbook-bot.migrationEnv" -}}
{{- $owner := .Values.database.owner -}}
{{- if not $owner.user -}}
{{- include "runbook-bot.databaseEnv" . -}}
{{- else -}}
{{- if eq $owner.user .Values.database.user -}}
{{- fail "database.owner.user: the owner role must differ from database.user (the runtime role); empty it to run with one role" -}}
{{- end -}}
- name: RUNBOOK_BOT_DATABASE_URL
  value: {{ include "runbook-bot.databaseUrl" . | quote }}
- name: RUNBOOK_BOT_DATABASE_MIGRATION_URL
  value: {{ include "runbook-bot.ownerDatabaseUrl" . | quote }}
{{- if or $owner.existingSecret $owner.password }}
- name: PGPASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ include "runbook-bot.ownerPasswordSecret" . }}
      key: {{ $owner.existingSecretKey | default "password" }}
{{- end }}
{{- end -}}
{{- end -}}

{{- define "runbook-bot.hasDatabasePassword" -}}
{{- if or .Values.database.existingSecret .Values.database.password -}}true{{- end -}}
{{- end -}}

{{/* Environment shared by the server, the workers and the migrations Job. */}}
{{- define "runbook-bot.databaseEnv" -}}
- name: RUNBOOK_BOT_DATABASE_URL
  value: {{ include "runbook-bot.databaseUrl" . | quote }}
{{- if include "runbook-bot.hasDatabasePassword" . }}
- name: PGPASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ include "runbook-bot.databasePasswordSecret" . }}
      key: {{ .Values.database.existingSecretKey | default "password" }}
{{- end }}
{{- end -}}

{{/* Settings the image sets as environment variables (which beat the settings file), so
     the chart sets them the same way: listen address, runbooks and templates. */}}
{{- define "runbook-bot.layoutEnv" -}}
- name: RUNBOOK_BOT_LISTEN_HOST
  value: "0.0.0.0"
- name: RUNBOOK_BOT_LISTEN_PORT
  value: {{ .Values.service.port | quote }}
- name: RUNBOOK_BOT_RUNBOOKS_DIR
  value: {{ ternary "/etc/runbook-bot/runbooks" "/app/runbooks" (not (empty (or .Values.runbooks.files .Values.runbooks.existingConfigMap))) | quote }}
- name: RUNBOOK_BOT_POSTMORTEM_TEMPLATES
  value: {{ (.Values.settings | default dict).postmortem_templates | default "/app/postmortem" | quote }}
{{- end -}}

{{/* The settings file (config.yaml): the free-form `settings` value with what the chart
     owns laid over it (file paths of mounted secrets, in-cluster access). */}}
{{- define "runbook-bot.settings" -}}
{{- $dir := include "runbook-bot.secretsDir" . -}}
{{- $owned := dict "kube_in_cluster" true "node_job_namespace" (include "runbook-bot.nodeJobNamespace" .) "webhook_token_file" (printf "%s/webhook/token" $dir) "log_key_file" (printf "%s/log/key" $dir) -}}
{{- if .Values.slack.enabled -}}
{{- $_ := set $owned "slack_bot_token_file" (printf "%s/slack/bot-token" $dir) -}}
{{- $_ := set $owned "slack_mode" .Values.slack.mode -}}
{{- $_ := set $owned "slack_channel" (required "slack.channel: set the channel id incident cards go to (C0123456789)" .Values.slack.channel) -}}
{{- if eq .Values.slack.mode "socket" -}}
{{- $_ := set $owned "slack_app_token_file" (printf "%s/slack/app-token" $dir) -}}
{{- else -}}
{{- $_ := set $owned "slack_signing_secret_file" (printf "%s/slack/signing-secret" $dir) -}}
{{- end -}}
{{- end -}}
{{- $settings := deepCopy (.Values.settings | default dict) -}}
{{- if .Values.bmc.credentials -}}
{{- $bmc := get $settings "bmc" | default dict -}}
{{- $profiles := dict -}}
{{- range $name, $profile := .Values.bmc.credentials -}}
{{- $_ := set $profiles $name (dict "username" (required (printf "bmc.credentials.%s.username: set the BMC user" $name) $profile.username) "password_file" (printf "%s/bmc/%s" $dir $name)) -}}
{{- end -}}
{{- $_ := set $bmc "credentials" $profiles -}}
{{- $_ := set $settings "bmc" $bmc -}}
{{- end -}}
{{- $console := get $settings "console" | default dict -}}
{{- $_ := set $console "session_secret_file" (printf "%s/console/session-secret" $dir) -}}
{{- if or .Values.console.adminToken .Values.console.existingSecret -}}
{{- $_ := set $console "admin_token_file" (printf "%s/console/admin-token" $dir) -}}
{{- end -}}
{{- $_ := set $settings "console" $console -}}
{{- if .Values.worker.separate -}}
{{- $_ := set $owned "serve_worker" false -}}
{{- end -}}
{{- toYaml (mergeOverwrite $settings $owned) -}}
{{- end -}}

{{/* The pod's and the container's security context: non-root, read-only root, no
     capabilities, the runtime's seccomp profile. */}}
{{- define "runbook-bot.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: {{ .Values.securityContext.runAsUser }}
runAsGroup: {{ .Values.securityContext.runAsUser }}
fsGroup: {{ .Values.securityContext.runAsUser }}
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "runbook-bot.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end -}}
