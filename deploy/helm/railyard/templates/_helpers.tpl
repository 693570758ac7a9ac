{{/* Labels of a part: railyard.labels (dict "root" $ "component" "api") */}}
{{- define "railyard.selector" -}}
app.kubernetes.io/name: railyard
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "railyard.labels" -}}
{{ include "railyard.selector" . }}
app.kubernetes.io/part-of: railyard
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- end }}

{{/* The image, by digest when one is given */}}
{{- define "railyard.image" -}}
{{- $tag := .Values.image.tag | default .Chart.AppVersion -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}:{{ $tag }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ $tag }}
{{- end -}}
{{- end }}

{{/* Where a process finds PostgreSQL and Redis: railyard.connections (dict "root" $ "session" true)
     session: the process needs a real session (schedulers, the migration) */}}
{{- define "railyard.connections" -}}
{{- $pg := .root.Values.postgresql -}}
{{- if eq $pg.mode "cloudnativepg" }}
{{- if .session }}
- name: DATABASE_URL
  valueFrom: { secretKeyRef: { name: {{ .root.Release.Name }}-pg-app, key: uri } }
{{- else }}
- name: RAILYARD_PG_PASSWORD
  valueFrom: { secretKeyRef: { name: {{ .root.Release.Name }}-pg-app, key: password } }
- name: DATABASE_URL
  value: postgresql://railyard:$(RAILYARD_PG_PASSWORD)@{{ .root.Release.Name }}-pg-pooler-rw:5432/railyard
{{- end }}
{{- else if eq $pg.mode "external" }}
- name: DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ $pg.external.existingSecret }}
      key: {{ if and .session $pg.external.schedulerKey }}{{ $pg.external.schedulerKey }}{{ else }}{{ $pg.external.key }}{{ end }}
{{- else }}
{{- fail "postgresql.mode must be external or cloudnativepg" }}
{{- end }}
{{- $redis := .root.Values.redis -}}
{{- if eq $redis.mode "bundled" }}
- name: RAILYARD_REDIS_PASSWORD
  valueFrom: { secretKeyRef: { name: {{ $redis.bundled.passwordSecret }}, key: password } }
- name: REDIS_URL
  value: redis://:$(RAILYARD_REDIS_PASSWORD)@sentinel/0
{{- else if eq $redis.mode "external" }}
- name: REDIS_URL
  valueFrom: { secretKeyRef: { name: {{ $redis.external.existingSecret }}, key: {{ $redis.external.key }} } }
{{- else }}
{{- fail "redis.mode must be external or bundled" }}
{{- end }}
{{- end }}

{{/* What every Railyard pod shares: railyard.pod (dict "root" $ "component" "worker" "session" false
     "container" (dict ...)) renders spec.template.spec's common part */}}
{{- define "railyard.podSecurity" -}}
serviceAccountName: {{ .Release.Name }}
automountServiceAccountToken: false
securityContext:
  runAsNonRoot: true
  runAsUser: 10001
  runAsGroup: 10001
  fsGroup: 10001
  seccompProfile: { type: RuntimeDefault }
volumes:
  - name: tmp
    emptyDir: { medium: Memory, sizeLimit: 64Mi }
{{- end }}

{{- define "railyard.containerSecurity" -}}
image: {{ include "railyard.image" . }}
imagePullPolicy: {{ if .Values.image.digest }}{{ .Values.image.pullPolicy }}{{ else }}Always{{ end }}
volumeMounts:
  - { name: tmp, mountPath: /tmp }
securityContext:
  runAsNonRoot: true
  runAsUser: 10001
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  privileged: false
  capabilities: { drop: [ALL] }
envFrom:
  - configMapRef: { name: {{ .Release.Name }}-config }
  - secretRef: { name: {{ .Values.existingSecret }} }
{{- end }}

{{/* Probes on a named port; liveness and readiness only after the startup probe */}}
{{- define "railyard.probes" -}}
startupProbe:
  httpGet: { path: /health/live, port: {{ . }} }
  periodSeconds: 2
  timeoutSeconds: 2
  failureThreshold: 30
readinessProbe:
  httpGet: { path: /health/ready, port: {{ . }} }
  periodSeconds: 5
  timeoutSeconds: 4
  failureThreshold: 3
livenessProbe:
  httpGet: { path: /health/live, port: {{ . }} }
  periodSeconds: 10
  timeoutSeconds: 4
  failureThreshold: 3
{{- end }}
