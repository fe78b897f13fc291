"""The agent configuration: kubelet field names, defaults, and errors that name the key."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from agent.alloc import PlannerConfig, PlannerError, TopologyManagerScope
from agent.config import (
    ASSUMED_RESERVATION,
    CONFIG_KEYS,
    AgentConfig,
    ConfigError,
    NodeAllocatable,
    NRTSettings,
    config_from_mapping,
    load_config,
)
from agent.cpuset import CPUSet
from agent.nri import NRIConfig
from tests.support.paths import REPO

BASE: dict[str, Any] = {"systemReserved": {"cpu": "1"}}


def cfg(**extra: Any) -> Any:
    data = dict(BASE)
    data.update(extra)
    return config_from_mapping(data, env={})


class TestDefaults:
    def test_podpin_defaults(self) -> None:
        """Defaults are the kubelet's except the topology policy and scope podpin needs."""
        config = cfg()
        assert ("static", "None", "best-effort", "pod") == (
            config.planner.cpu_manager_policy,
            config.planner.memory_manager_policy,
            config.planner.topology_manager_policy,
            config.planner.topology_manager_scope,
        )
        assert (100_000, 10.0, 300.0, "0.0.0.0:9363") == (
            config.planner.cpu_cfs_quota_period_us,
            config.reconcile_period,
            config.pod_resync_period,
            config.metrics_bind_address,
        )
        assert "max 100000" == str(config.planner.lifted_cpu_max())

    def test_runtime_root(self) -> None:
        """runtimeRoot (where containerd's and CRI-O's state is) defaults to the host root."""
        assert (Path("/"), Path("/host")) == (cfg().runtime_root, cfg(runtimeRoot="/host").runtime_root)

    def test_node_name_from_environment(self) -> None:
        """nodeName falls back to NODE_NAME."""
        assert "worker-7" == config_from_mapping(BASE, env={"NODE_NAME": "worker-7"}).node_name
        assert "cfg" == config_from_mapping({**BASE, "nodeName": "cfg"}, env={"NODE_NAME": "env"}).node_name

    @pytest.mark.parametrize(
        ("data", "reserved"),
        [
            ({"systemReserved": {"cpu": "1"}}, 1),
            ({"systemReserved": {"cpu": "500m"}, "kubeReserved": {"cpu": "600m"}}, 2),
            ({"reservedSystemCPUs": "0,16", "systemReserved": {"cpu": "5"}}, 2),
        ],
    )
    def test_reserved_cpu_count(self, data: dict[str, Any], reserved: int) -> None:
        """ceil(kube + system reserved cpu), or the size of reservedSystemCPUs which overrides them."""
        assert reserved == config_from_mapping(data, env={}).planner.num_reserved_cpus()

    @pytest.mark.parametrize(
        ("data", "reserved", "assumed"),
        [
            ({}, 1, True),
            ({"systemReserved": {"memory": "1Gi"}}, 1, True),
            ({"kubeReserved": {"cpu": "2"}}, 2, False),
            ({"systemReserved": {"cpu": "1500m"}}, 2, False),
            ({"reservedSystemCPUs": "0,16,17"}, 3, False),
            ({"cpuManagerPolicy": "none"}, 0, False),
        ],
    )
    def test_built_in_defaults_reserve_one_cpu(self, data: dict[str, Any], reserved: int, assumed: bool) -> None:
        """The defaults are valid: without any CPU reservation the static policy reserves one CPU, and says so."""
        config = config_from_mapping(data, env={})
        assert (reserved, (ASSUMED_RESERVATION,) if assumed else ()) == (
            config.planner.num_reserved_cpus(),
            config.assumed,
        )

    def test_load_config_without_a_file_is_valid(self) -> None:
        """``podpin run`` without --config: the built-in defaults load (they used to refuse themselves)."""
        config = load_config(None, env={"NODE_NAME": "n"})
        assert ("n", 1, 1000) == (
            config.node_name,
            config.planner.num_reserved_cpus(),
            config.system_reserved["cpu"],
        )

    def test_max_allowable_numa_nodes_reads_like_go_atoi(self) -> None:
        """A leading plus sign is accepted, as Go's strconv.Atoi accepts it."""
        options = cfg(topologyManagerPolicyOptions={"max-allowable-numa-nodes": "+16"}).planner.topology_policy_options
        assert 16 == options.max_allowable_numa_nodes

    def test_policy_options_parsed_once(self) -> None:
        """cpuManagerPolicyOptions become typed booleans."""
        config = cfg(cpuManagerPolicyOptions={"full-pcpus-only": "true", "strict-cpu-reservation": "false"})
        assert (True, False) == (
            config.planner.cpu_policy_options.full_pcpus_only,
            config.planner.cpu_policy_options.strict_cpu_reservation,
        )

    def test_reserved_memory(self) -> None:
        """reservedMemory entries are parsed to bytes per NUMA node."""
        config = cfg(
            memoryManagerPolicy="Static",
            systemReserved={"cpu": "1", "memory": "924Mi"},
            reservedMemory=[{"numaNode": 0, "limits": {"memory": "1Gi"}}],
        )
        assert {"memory": 2**30} == dict(config.planner.reserved_memory[0].limits)
        assert CPUSet() == config.planner.reserved_system_cpus


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"cpuManagerPolcy": "static"}, "unknown configuration key 'cpuManagerPolcy'"),
        (
            {"topologyManagerPolicy": "strict"},
            "topologyManagerPolicy: 'strict' is not one of none, best-effort, restricted, single-numa-node",
        ),
        ({"topologyManagerScope": "node"}, "topologyManagerScope: 'node' is not one of container, pod"),
        ({"memoryManagerPolicy": "static"}, "memoryManagerPolicy: 'static' is not one of None, Static"),
        (
            {"cpuManagerPolicyOptions": {"full-pcpu-only": "true"}},
            'cpuManagerPolicyOptions: unknown CPU Manager Policy option: "full-pcpu-only"',
        ),
        (
            {"cpuManagerPolicyOptions": {"full-pcpus-only": "yes"}},
            (
                'cpuManagerPolicyOptions: bad value for option "full-pcpus-only": strconv.ParseBool: parsing "yes": '
                "invalid syntax"
            ),
        ),
        (
            {"cpuManagerPolicyOptions": {"full-pcpus-only": "true", "distribute-cpus-across-cores": "true"}},
            (
                "cpuManagerPolicyOptions: static policy options full-pcpus-only and distribute-cpus-across-cores "
                "can not be used at the same time"
            ),
        ),
        (
            {"topologyManagerPolicyOptions": {"max-allowable-numa-nodes": "4"}},
            (
                "topologyManagerPolicyOptions: the minimum value of max-allowable-numa-nodes should not be less "
                "than 8, value: 4"
            ),
        ),
        (
            {"topologyManagerPolicyOptions": {"max-allowable-numa-nodes": "--9"}},
            (
                'topologyManagerPolicyOptions: bad value for option "max-allowable-numa-nodes": strconv.Atoi: '
                'parsing "--9": '
                "invalid syntax"
            ),
        ),
        (
            {"topologyManagerPolicyOptions": {"max-allowable-numa-nodes": "\u0661\u0666"}},
            (
                'topologyManagerPolicyOptions: bad value for option "max-allowable-numa-nodes": strconv.Atoi: parsing '
                '"\u0661\u0666": invalid syntax'
            ),
        ),
        (
            {"topologyManagerPolicyOptions": {"prefer-closest": "true"}},
            'topologyManagerPolicyOptions: unknown Topology Manager Policy option: "prefer-closest"',
        ),
        ({"reservedSystemCPUs": "0-x"}, "reservedSystemCPUs: invalid cpulist '0-x': 'x' is not a CPU id"),
        ({"systemReserved": {"cpu": "lots"}}, "systemReserved.cpu: invalid quantity 'lots'"),
        (
            {"systemReserved": {"cpu": "0"}},
            (
                "kubeReserved/systemReserved/reservedSystemCPUs: the static policy requires systemreserved.cpu + "
                "kubereserved.cpu to be greater than zero"
            ),
        ),
        ({"reconcilePeriod": "10"}, "reconcilePeriod: '10' is not a duration such as \"10s\""),
        ({"reconcilePeriod": "0s"}, "reconcilePeriod: '0s' must be positive"),
        ({"cpuCFSQuotaPeriod": "5s"}, "cpuCFSQuotaPeriod: '5s' must be between 1ms and 1s"),
        ({"dryRun": "yes"}, "dryRun: 'yes' is not true or false"),
        ({"cgroupWatch": "fanotify"}, "cgroupWatch: 'fanotify' is not one of auto, inotify, poll, off"),
        ({"runtimeRoot": 1}, "runtimeRoot: 1 is not a string"),
        ({"nri": {"enabled": "yes"}}, "nri.enabled: 'yes' is not true or false"),
        ({"metricsBindAddress": "9363"}, "metricsBindAddress: '9363' is not HOST:PORT"),
        ({"kubeReserved": ["cpu"]}, "kubeReserved: ['cpu'] is not a map"),
        ({"evictionHard": {"memory.avail": "1Gi"}}, "evictionHard.memory.avail: unknown eviction signal"),
        (
            {"memoryManagerPolicy": "Static"},
            "reservedMemory: [memorymanager] you should specify the system reserved memory",
        ),
        (
            {"memoryManagerPolicy": "Static", "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1Gi"}}]},
            (
                'reservedMemory: the total amount 1073741824 of type "memory" is not equal to the value 104857600 '
                "determined by "
                "Node Allocatable (kubeReserved + systemReserved + evictionHard memory.available)"
            ),
        ),
        (
            {"reservedMemory": [{"numaNode": 0, "limits": {"cpu": "1"}}]},
            "reservedMemory[0].limits.cpu: only memory and hugepages-<size> can be reserved",
        ),
        (
            {"reservedMemory": [{"numaNode": -1, "limits": {"memory": "1Gi"}}]},
            "reservedMemory[0].numaNode: -1 is not a NUMA node id",
        ),
        (
            {
                "reservedMemory": [
                    {"numaNode": 0, "limits": {"memory": "1Gi"}},
                    {"numaNode": 0, "limits": {"memory": "1Gi"}},
                ]
            },
            "reservedMemory[1].numaNode: duplicate entry for NUMA node 0",
        ),
        (
            {"cpuManagerPolicyOptions": {"align-by-socket": "true"}, "topologyManagerPolicy": "single-numa-node"},
            (
                "cpuManagerPolicyOptions: Topology manager single-numa-node policy is incompatible with CPUManager "
                "align-by-socket policy option"
            ),
        ),
    ],
)
def test_bad_values_name_the_key(data: dict[str, Any], message: str) -> None:
    """Every unknown key or bad value is refused with a message naming the key."""
    merged = {**BASE, **data}
    with pytest.raises(ConfigError) as err:
        config_from_mapping(merged, env={})
    assert str(err.value).startswith(message)


def test_load_config_file_errors(tmp_path: Path) -> None:
    """A missing file, bad YAML or a non-mapping are one-line errors naming the file."""
    with pytest.raises(ConfigError, match="cannot read the configuration file"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("cpuManagerPolicy: [")
    with pytest.raises(ConfigError, match=f"^{bad}: not valid YAML"):
        load_config(bad)
    listy = tmp_path / "list.yaml"
    listy.write_text("- a\n")
    with pytest.raises(ConfigError, match=f"^{listy}: the configuration must be a YAML mapping, got list"):
        load_config(listy)


@pytest.mark.parametrize("name", sorted(p.name for p in (REPO / "deploy" / "examples").glob("config-*.yaml")))
def test_example_configs_load(name: str) -> None:
    """Every example configuration is valid."""
    load_config(REPO / "deploy" / "examples" / name, env={})


def test_contract_keys() -> None:
    """The configuration accepts exactly the documented keys."""
    assert {
        "cpuManagerPolicy",
        "cpuManagerPolicyOptions",
        "memoryManagerPolicy",
        "topologyManagerPolicy",
        "topologyManagerScope",
        "topologyManagerPolicyOptions",
        "reservedSystemCPUs",
        "kubeReserved",
        "systemReserved",
        "evictionHard",
        "reservedMemory",
        "cpuCFSQuotaPeriod",
        "nodeName",
        "cgroupRoot",
        "cgroupDriver",
        "reconcilePeriod",
        "podResyncPeriod",
        "stateDir",
        "kubeletCPUManagerStatePath",
        "dryRun",
        "metricsBindAddress",
        "logLevel",
        "logFormat",
        "cgroupWatch",
        "runtimeRoot",
        "runtimePaths",
        "nrt",
        "podResourcesSocket",
        "nri",
        "stateBindAddress",
        "deviceWaitTimeout",
        "kubeletConfigPath",
    } == {entry.key for entry in CONFIG_KEYS}


def test_nri_section_reaches_the_agent_config() -> None:
    """The nri section is read by the NRI package's parser into AgentConfig.nri; absent, it is the defaults."""
    expected = (NRIConfig(), NRIConfig(enabled=False, socket_path=Path("/run/containerd/nri.sock")))
    given = cfg(nri={"enabled": False, "socketPath": "/run/containerd/nri.sock"})
    assert expected == (cfg().nri, given.nri)


class TestKeyTable:
    def test_every_setting_is_filled_by_exactly_one_key(self) -> None:
        """Each AgentConfig and PlannerConfig field comes from one table entry (the reserved CPU millis from two).

        ``assumed`` is not a setting: it says which value the checks across keys filled in; nor are ``group`` and
        ``inherited``, which say where the node's configuration came from.
        """
        agent_fields = {f.name for f in dataclasses.fields(AgentConfig)} - {"planner", "assumed", "group", "inherited"}
        planner_fields = {f"planner.{f.name}" for f in dataclasses.fields(PlannerConfig)}
        filled = [entry.field for entry in CONFIG_KEYS]
        assert sorted(filled) == sorted(set(filled))
        assert agent_fields | planner_fields - {"planner.reserved_cpu_millis"} == set(filled)

    def test_every_default_is_a_valid_file_value(self) -> None:
        """Writing each key's default into the file gives the same configuration as leaving the key out."""
        explicit = {entry.key: entry.default for entry in CONFIG_KEYS}
        assert cfg() == config_from_mapping({**explicit, **BASE}, env={})

    def test_every_key_is_documented(self) -> None:
        """Each key says what it is for, in one line."""
        assert [] == [entry.key for entry in CONFIG_KEYS if not entry.doc or "\n" in entry.doc]


def test_node_allocatable_slice() -> None:
    """The simulator's slice: kube + system reserved memory and the evictionHard threshold, nothing else."""
    config = cfg(
        kubeReserved={"cpu": "1", "memory": "1Gi"},
        systemReserved={"memory": "512Mi"},
        evictionHard={"memory.available": "100Mi"},
    )
    assert NodeAllocatable(reserved_memory=(1024 + 512) << 20, eviction_hard_memory=100 << 20) == (
        config.node_allocatable
    )


class TestPlannerConfig:
    def test_the_planner_gets_only_its_settings(self) -> None:
        """AgentConfig.planner is the core's own value: the agent's settings stay outside it."""
        planner = cfg(cgroupWatch="poll", reservedSystemCPUs="0,16").planner
        assert isinstance(planner, PlannerConfig)
        assert (CPUSet.parse("0,16"), 2) == (planner.reserved_system_cpus, planner.num_reserved_cpus())
        assert not hasattr(planner, "cgroup_watch")

    @pytest.mark.parametrize(
        ("field", "value", "message"),
        [
            ("topology_manager_scope", "pods", "topologyManagerScope: 'pods' is not one of container, pod"),
            (
                "topology_manager_policy",
                "best_effort",
                "topologyManagerPolicy: 'best_effort' is not one of none, best-effort, restricted, single-numa-node",
            ),
            ("cpu_manager_policy", "Static", "cpuManagerPolicy: 'Static' is not one of static, none"),
            ("memory_manager_policy", "static", "memoryManagerPolicy: 'static' is not one of None, Static"),
        ],
    )
    def test_a_misspelt_name_fails_naming_the_key(self, field: str, value: str, message: str) -> None:
        """A PlannerConfig built with an unknown scope or policy name never becomes another scope or policy."""
        with pytest.raises(PlannerError) as raised:
            dataclasses.replace(cfg().planner, **{field: value})
        assert message == str(raised.value)

    def test_names_given_as_strings_become_enums(self) -> None:
        """A plain string naming a known scope is accepted and stored as the enum member."""
        planner = dataclasses.replace(cfg().planner, topology_manager_scope="container")
        assert TopologyManagerScope.CONTAINER is planner.topology_manager_scope


class TestNRTKeys:
    def test_defaults(self) -> None:
        """NRT export is off, at most every 5 s when on; the kubelet's default PodResources socket."""
        config = cfg()
        assert (NRTSettings(enabled=False, min_interval=5.0), Path("/var/lib/kubelet/pod-resources/kubelet.sock")) == (
            config.nrt,
            config.pod_resources_socket,
        )

    def test_values(self) -> None:
        """Both keys are read; a map that leaves a key of nrt out gets that key's default."""
        config = cfg(nrt={"enabled": True, "minInterval": "1m"}, podResourcesSocket="/k.sock")
        assert (NRTSettings(enabled=True, min_interval=60.0), Path("/k.sock")) == (
            config.nrt,
            config.pod_resources_socket,
        )
        assert NRTSettings(enabled=True, min_interval=5.0) == cfg(nrt={"enabled": True}).nrt

    @pytest.mark.parametrize(
        ("value", "message"),
        [
            ({"nrt": True}, "nrt: True is not a map"),
            ({"nrt": {"enable": True}}, "nrt.enable: unknown key (known: enabled, minInterval, takeOver)"),
            ({"nrt": {"enabled": "yes"}}, "nrt.enabled: 'yes' is not true or false"),
            ({"nrt": {"minInterval": "soon"}}, "nrt.minInterval: 'soon' is not a duration such as \"10s\""),
            ({"nrt": {"minInterval": "-1s"}}, "nrt.minInterval: '-1s' must not be negative"),
            ({"podResourcesSocket": 5}, "podResourcesSocket: 5 is not a string"),
        ],
    )
    def test_bad_values_name_the_key(self, value: dict[str, Any], message: str) -> None:
        """A bad value stops the agent with the key named."""
        with pytest.raises(ConfigError) as caught:
            cfg(**value)
        assert str(caught.value).startswith(message)


class TestHostileFiles:
    """Configuration files an attacker or a bad day writes: one clean ConfigError naming the file, never a traceback."""

    @staticmethod
    def _load(tmp_path: Path, content: bytes) -> str:
        path = tmp_path / "config.yaml"
        path.write_bytes(content)
        with pytest.raises(ConfigError) as err:
            load_config(path, env={})
        return str(err.value).removeprefix(f"{path}: ")

    def test_alias_bomb(self, tmp_path: Path) -> None:
        """A billion-laughs value is refused once its expansion passes the bound on values.

        Failed before the fix: the aliases expanded while the error message quoted the value (9**9 strings).
        """
        lines = ['l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
        lines += [f"l{n}: &l{n} [{','.join([f'*l{n - 1}'] * 9)}]" for n in range(1, 9)]
        text = "\n".join(lines).replace("l8: &l8", "nodeName: &l8") + "\n"
        expected = (
            "not valid YAML: line 5, column 30: more than 50000 values in one file once its aliases are expanded (*l3)"
        )
        assert expected == self._load(tmp_path, text.encode())

    def test_mixed_type_unknown_keys(self, tmp_path: Path) -> None:
        """Unknown keys of several YAML types are named, not sorted into a TypeError.

        Failed before the fix: ``TypeError: '<' not supported between instances of 'str' and 'int'``.
        """
        message = self._load(tmp_path, b"1: a\nzzz: b\nnull: c\ntrue: d\n")
        assert message.startswith("unknown configuration key 'zzz' (known keys: ")

    @pytest.mark.parametrize(
        ("content", "message"),
        [
            (b"systemReserved: {1: 2}\n", "systemReserved: 1 is not a resource name"),
            (b"systemReserved: {cpu: 1}\nevictionHard: {1: a, b: c}\n", "evictionHard.b: unknown eviction signal"),
            (b"systemReserved: {cpu: '" + b"1" * 4401 + b"'}\n", "systemReserved.cpu: invalid quantity '11111"),
            (b"systemReserved: {cpu: 1}\nnodeName: [" + b"1," * 10_000 + b"1]\n", "nodeName: [1, 1, 1, 1, 1, 1, ...]"),
            (b"\xff\xfe: 1\n", "not UTF-8 text (invalid start byte at byte 0)"),
            (b"a: 1\n---\nb: 2\n", "not valid YAML: 2 YAML documents; expected one"),
            (b"#" * (1 << 20) + b"\n", "larger than 1048576 bytes; not a configuration file"),
        ],
        ids=[
            "int-resource-name",
            "mixed-eviction-keys",
            "4401-digit-cpu",
            "long-value",
            "not-utf8",
            "two-docs",
            "1MiB",
        ],
    )
    def test_bad_files(self, tmp_path: Path, content: bytes, message: str) -> None:
        """Each bad file is one line naming the key or the problem, with long values cut short."""
        assert self._load(tmp_path, content).startswith(message)
