{{/*
Names, labels and the computed values every template shares: one definition each.
*/}}

{{/* The base name of every object: fullnameOverride, else the release name. */}}
{{- define "podpin.fullname" -}}
{{- default .Release.Name .Values.fullnameOverride | trunc 52 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels on every object. */}}
{{- define "podpin.labels" -}}
app.kubernetes.io/name: podpin
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: podpin
{{- end -}}

{{/* The agent pods' identity: the DaemonSet's selector, the Service's and the NetworkPolicy's (never change it:
a DaemonSet's selector is immutable). */}}
{{- define "podpin.selectorLabels" -}}
app.kubernetes.io/name: podpin
app.kubernetes.io/component: node-agent
{{- end -}}

{{/* The image reference: repository:tag, tag defaulting to the appVersion, then @digest when one is given. */}}
{{- define "podpin.image" -}}
{{- $ref := printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- if .Values.image.digest -}}{{- $ref = printf "%s@%s" $ref .Values.image.digest -}}{{- end -}}
{{- $ref -}}
{{- end -}}

{{/* The metrics port: the port of config.metricsBindAddress (HOST:PORT or [V6]:PORT). */}}
{{- define "podpin.metricsPort" -}}
{{- .Values.config.metricsBindAddress | default "0.0.0.0:9363" | splitList ":" | last | int -}}
{{- end -}}

{{/* The agent's configuration file: the config values plus what the chart itself decides (the kubelet state path
and the PodResources socket follow the kubeletState mount; the agent's nri section follows the NRI socket mount,
which puts the socket at the same path in the container as on the node; runtimeRoot is where runtimeState mounts
the runtimes' state directories). */}}
{{- define "podpin.configFile" -}}
{{- $config := deepCopy .Values.config -}}
{{- if .Values.kubeletState.enabled -}}
{{- $kubelet := trimSuffix "/" .Values.kubeletState.mountPath -}}
{{- $_ := set $config "kubeletCPUManagerStatePath" (printf "%s/cpu_manager_state" $kubelet) -}}
{{- $_ := set $config "podResourcesSocket" (printf "%s/pod-resources/kubelet.sock" $kubelet) -}}
{{- end -}}
{{- $_ := set $config "nri" (dict "enabled" .Values.nri.enabled "socketPath" .Values.nri.socketPath "podWaitTimeout" .Values.nri.podWaitTimeout) -}}
{{- if .Values.runtimeState.enabled -}}
{{- $_ := set $config "runtimeRoot" .Values.runtimeState.mountRoot -}}
{{- end -}}
{{- toYaml $config -}}
{{- end -}}

{{/* The cgroup directory the agent writes below the cgroup root: cgroupSubtree, else the kubelet's driver's
(config.cgroupDriver cgroupfs: kubepods; systemd and auto: kubepods.slice, the default of kubeadm and of every
kubelet since 1.22 on a systemd host). */}}
{{- define "podpin.cgroupSubtree" -}}
{{- if .Values.cgroupSubtree -}}
{{- .Values.cgroupSubtree -}}
{{- else if eq (.Values.config.cgroupDriver | default "auto") "cgroupfs" -}}
kubepods
{{- else -}}
kubepods.slice
{{- end -}}
{{- end -}}

{{/* The system-node-critical pods the namespace may hold: criticalPodQuota.pods, else two per opted-in node (the
agent, and the reset pod of the uninstall DaemonSet while it replaces the agent) for criticalPodQuota.nodes. */}}
{{- define "podpin.criticalPods" -}}
{{- .Values.criticalPodQuota.pods | default (mul 2 .Values.criticalPodQuota.nodes) -}}
{{- end -}}
