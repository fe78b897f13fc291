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

{{/* The agent pods' identity: the DaemonSet's selector, the Service's and the NetworkPolicy's. The instance keeps
two releases in one namespace from selecting each other's pods (never change it: a DaemonSet's selector is
immutable). */}}
{{- define "podpin.selectorLabels" -}}
app.kubernetes.io/name: podpin
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: node-agent
{{- end -}}

{{/* The reset pods' identity (the uninstall hook's DaemonSet and its NetworkPolicy). */}}
{{- define "podpin.resetSelectorLabels" -}}
app.kubernetes.io/name: podpin
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: uninstall
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
{{- $_ := set $config "kubeletConfigPath" (ternary (printf "%s/%s" $kubelet .Values.kubeletState.configFile) "" (ne .Values.kubeletState.configFile "")) -}}
{{- end -}}
{{- $_ := set $config "nri" (dict "enabled" .Values.nri.enabled "socketPath" .Values.nri.socketPath "podWaitTimeout" .Values.nri.podWaitTimeout) -}}
{{- if .Values.runtimeState.enabled -}}
{{- $_ := set $config "runtimeRoot" .Values.runtimeState.mountRoot -}}
{{- $paths := .Values.runtimeState.paths | default dict -}}
{{- $section := dict "preset" ($paths.preset | default "default") -}}
{{- range $key := list "containerdState" "crioRunroot" "crioStorageDriver" "sandboxerDir" -}}
{{- if get $paths $key }}{{ $_ := set $section $key (get $paths $key) }}{{ end -}}
{{- end -}}
{{- $_ := set $config "runtimePaths" $section -}}
{{- end -}}
{{- toYaml $config -}}
{{- end -}}

{{/* The node directories holding the runtimes' bundles, one per line (the agent's runtimePaths, computed the same
way: agent/runtime/paths.py): containerd's tasks, containerd's shim sandboxer's sandboxes, CRI-O's containers. */}}
{{- define "podpin.runtimeStateDirs" -}}
{{- $paths := .Values.runtimeState.paths | default dict -}}
{{- $preset := $paths.preset | default "default" -}}
{{- $containerd := $paths.containerdState | default (ternary "/run/k3s/containerd" "/run/containerd" (has $preset (list "k3s" "rke2"))) | trimSuffix "/" -}}
{{- $sandboxer := $paths.sandboxerDir | default (printf "%s/io.containerd.sandbox.controller.v1.shim" $containerd) | trimSuffix "/" -}}
{{- $crio := $paths.crioRunroot | default "/run/containers/storage" | trimSuffix "/" -}}
{{- printf "%s/io.containerd.runtime.v2.task/k8s.io\n%s/k8s.io\n%s/%s-containers" $containerd $sandboxer $crio ($paths.crioStorageDriver | default "overlay") -}}
{{- end -}}

{{/* The cgroup directory the agent writes below the cgroup root: cgroupSubtree, else the kubelet's driver's
(config.cgroupDriver cgroupfs: kubepods; systemd: kubepods.slice); empty with cgroupDriver auto, where the node's
driver is known only on the node: the whole cgroup tree is then mounted writable (a subtree that does not exist
would keep the pod from starting, and creating it would make a cgroup). */}}
{{- define "podpin.cgroupSubtree" -}}
{{- if .Values.cgroupSubtree -}}
{{- .Values.cgroupSubtree -}}
{{- else if eq (.Values.config.cgroupDriver | default "auto") "cgroupfs" -}}
kubepods
{{- else if eq (.Values.config.cgroupDriver | default "auto") "systemd" -}}
kubepods.slice
{{- end -}}
{{- end -}}

{{/* The cgroup mounts of the agent's and the reset's containers: the tree read-only and the kubelet's pod subtree
read-write, or (cgroupDriver auto, no cgroupSubtree) the whole tree read-write. */}}
{{- define "podpin.cgroupMounts" -}}
{{- $subtree := include "podpin.cgroupSubtree" . -}}
{{- $root := .Values.config.cgroupRoot | default "/sys/fs/cgroup" -}}
- name: cgroup
  mountPath: {{ $root }}
  readOnly: {{ ne $subtree "" }}
{{- if $subtree }}
- name: cgroup-pods
  mountPath: {{ $root }}/{{ $subtree }}
{{- end }}
{{- end -}}

{{- define "podpin.cgroupVolumes" -}}
{{- $subtree := include "podpin.cgroupSubtree" . -}}
- name: cgroup
  hostPath:
    path: /sys/fs/cgroup
    type: Directory
{{- if $subtree }}
# Type Directory: never create it (a mkdir in the cgroup tree makes a cgroup); a wrong cgroupSubtree leaves the pod
# in ContainerCreating with a FailedMount Event naming the path.
- name: cgroup-pods
  hostPath:
    path: /sys/fs/cgroup/{{ $subtree }}
    type: Directory
{{- end }}
{{- end -}}

{{/* The checksum that rolls the agents: of the configuration without the keys they follow live (the agent takes
reconcilePeriod and deviceWaitTimeout without a restart, agent/config.py LIVE_KEYS), in every section. */}}
{{- define "podpin.restartChecksum" -}}
{{- $config := fromYaml (include "podpin.configFile" .) -}}
{{- $live := list "reconcilePeriod" "deviceWaitTimeout" -}}
{{- range $live }}{{ $_ := unset $config . }}{{ end -}}
{{- range $section := list "groups" "nodes" -}}
{{- range $name, $keys := (get $config $section | default dict) -}}
{{- range $live }}{{ $_ := unset ($keys | default dict) . }}{{ end -}}
{{- end -}}
{{- end -}}
{{- toYaml $config | sha256sum -}}
{{- end -}}

{{/* The system-node-critical pods the namespace may hold: criticalPodQuota.pods, else two per opted-in node (the
agent, and the reset pod of the uninstall DaemonSet while it replaces the agent) for criticalPodQuota.nodes. */}}
{{- define "podpin.criticalPods" -}}
{{- .Values.criticalPodQuota.pods | default (mul 2 .Values.criticalPodQuota.nodes) -}}
{{- end -}}

{{/* Seconds in a Go duration ("1h2m", "500ms", ".5s", "-1s"), as a float; the schema checked its shape. */}}
{{- define "podpin.seconds" -}}
{{- $total := 0.0 -}}
{{- $units := dict "ns" 0.000000001 "us" 0.000001 "µs" 0.000001 "ms" 0.001 "s" 1.0 "m" 60.0 "h" 3600.0 -}}
{{- range regexFindAll "[0-9.]+(ns|us|µs|ms|s|m|h)" (toString .) -1 -}}
{{- $number := regexFind "^[0-9.]+" . -}}
{{- if hasPrefix "." $number }}{{ $number = printf "0%s" $number }}{{ end -}}
{{- $total = addf $total (mulf (float64 (trimSuffix "." $number)) (get $units (trimPrefix (regexFind "^[0-9.]+" .) .))) -}}
{{- end -}}
{{- if hasPrefix "-" (toString .) }}{{ $total = mulf $total -1.0 }}{{ end -}}
{{- $total -}}
{{- end -}}

{{/* What the agent refuses in one configuration section and a schema pattern cannot say (agent/config.py): a
descending CPU range or an id beyond 8191, a duration out of its range, a port beyond 65535, fewer than 8
max-allowable-numa-nodes, an explicit zero CPU reservation under the static policy. Called with (list $section
$where), $where naming the section in the message (config, config.groups.NAME, config.nodes.NAME). */}}
{{- define "podpin.checkSection" -}}
{{- $section := index . 0 -}}
{{- $where := index . 1 -}}
{{- with $section.reservedSystemCPUs -}}
{{- range splitList "," (toString .) -}}
{{- $bounds := splitList "-" (trim .) -}}
{{- range $bounds }}{{ if gt (atoi (trim .)) 8191 }}{{ fail (printf "%s.reservedSystemCPUs: CPU id %s exceeds 8191" $where (trim .)) }}{{ end }}{{ end -}}
{{- if and (eq (len $bounds) 2) (gt (atoi (trim (first $bounds))) (atoi (trim (last $bounds)))) -}}
{{- fail (printf "%s.reservedSystemCPUs: range %s is descending" $where (trim .)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- range $key := list "reconcilePeriod" "podResyncPeriod" -}}
{{- if hasKey $section $key }}{{ if le (include "podpin.seconds" (get $section $key) | float64) 0.0 -}}
{{- fail (printf "%s.%s: %v must be positive" $where $key (get $section $key)) -}}
{{- end }}{{ end -}}
{{- end -}}
{{- if hasKey $section "deviceWaitTimeout" }}{{ if lt (include "podpin.seconds" $section.deviceWaitTimeout | float64) 0.0 -}}
{{- fail (printf "%s.deviceWaitTimeout: %v must not be negative" $where $section.deviceWaitTimeout) -}}
{{- end }}{{ end -}}
{{- if and (hasKey $section "nrt") (hasKey ($section.nrt | default dict) "minInterval") }}{{ if lt (include "podpin.seconds" $section.nrt.minInterval | float64) 0.0 -}}
{{- fail (printf "%s.nrt.minInterval: %v must not be negative" $where $section.nrt.minInterval) -}}
{{- end }}{{ end -}}
{{- with $section.cpuCFSQuotaPeriod -}}
{{- $seconds := include "podpin.seconds" . | float64 -}}
{{- if or (lt $seconds 0.001) (gt $seconds 1.0) }}{{ fail (printf "%s.cpuCFSQuotaPeriod: %v must be between 1ms and 1s" $where .) }}{{ end -}}
{{- end -}}
{{- range $key := list "metricsBindAddress" "stateBindAddress" -}}
{{- with (get $section $key) -}}
{{- if gt (atoi (regexFind "[0-9]+$" .)) 65535 }}{{ fail (printf "%s.%s: %v is not HOST:PORT" $where $key .) }}{{ end -}}
{{- end -}}
{{- end -}}
{{- with (get ($section.topologyManagerPolicyOptions | default dict) "max-allowable-numa-nodes") -}}
{{- if lt (atoi .) 8 }}{{ fail (printf "%s.topologyManagerPolicyOptions: the minimum value of max-allowable-numa-nodes should not be less than 8, value: %v" $where .) }}{{ end -}}
{{- end -}}
{{- $cpus := list -}}
{{- range $key := list "kubeReserved" "systemReserved" }}{{ with (get ($section | default dict) $key) }}{{ if hasKey . "cpu" }}{{ $cpus = append $cpus (toString .cpu) }}{{ end }}{{ end }}{{ end -}}
{{- if and $cpus (not $section.reservedSystemCPUs) (ne ($section.cpuManagerPolicy | default "static") "none") -}}
{{- $zero := true -}}
{{- range $cpus }}{{ if not (regexMatch "^\\+?0*(\\.0*)?(e[+-]?[0-9]+|m|[kMGTPE]i?|[nu])?$" .) }}{{ $zero = false }}{{ end }}{{ end -}}
{{- if $zero -}}
{{- fail (printf "%s: the static policy requires systemReserved.cpu + kubeReserved.cpu to be greater than zero (or reservedSystemCPUs)" $where) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Every section of the configuration checked (podpin.checkSection); the nri values' podWaitTimeout too. */}}
{{- define "podpin.checkConfig" -}}
{{- include "podpin.checkSection" (list .Values.config "config") -}}
{{- range $kind := list "groups" "nodes" -}}
{{- range $name, $section := (get $.Values.config $kind | default dict) -}}
{{- include "podpin.checkSection" (list ($section | default dict) (printf "config.%s.%s" $kind $name)) -}}
{{- end -}}
{{- end -}}
{{- $wait := include "podpin.seconds" .Values.nri.podWaitTimeout | float64 -}}
{{- if or (lt $wait 0.0) (gt $wait 0.8) -}}
{{- fail (printf "nri.podWaitTimeout: %v is not a duration between 0s and 800ms such as \"500ms\"" .Values.nri.podWaitTimeout) -}}
{{- end -}}
{{- end -}}

{{/* A container of the reset DaemonSet (the uninstall hook): the agent's image, user, environment and the host
paths the reset needs, as the agent sees them. Called with (dict "root" $ "args" LIST "cpu" REQUEST). */}}
{{- define "podpin.resetContainer" -}}
{{- $root := .root -}}
image: {{ include "podpin.image" $root }}
imagePullPolicy: {{ $root.Values.image.pullPolicy }}
args:
  {{- toYaml .args | nindent 2 }}
env:
  - name: NODE_NAME
    valueFrom:
      fieldRef:
        fieldPath: spec.nodeName
resources:
  requests:
    cpu: {{ .cpu }}
    memory: 96Mi
  limits:
    cpu: 500m
    memory: 192Mi
securityContext:
  runAsUser: 0
  runAsGroup: 0
  runAsNonRoot: false
  privileged: false
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  capabilities:
    drop:
      - ALL
  seccompProfile:
    type: RuntimeDefault
volumeMounts:
  - name: config
    mountPath: /etc/podpin
    readOnly: true
  - name: sys
    mountPath: /sys
    readOnly: true
    recursiveReadOnly: IfPossible
  {{- include "podpin.cgroupMounts" $root | nindent 2 }}
  - name: state
    mountPath: {{ $root.Values.config.stateDir | default "/var/lib/podpin" }}
  - name: tmp
    mountPath: /tmp
{{- end -}}
