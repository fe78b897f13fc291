"""Audits of what only the node can tell: thread affinities of pinned containers, interference on exclusive CPUs.

:mod:`.probe` is the edge (psutil over the node's procfs, behind the
:class:`NodeProbe` protocol); :mod:`.affinity` checks each thread of a pinned
container against the CPUs the plan gave it; :mod:`.interference` exposes
interrupt and steal time of the exclusively assigned CPUs at scrape time.
"""

from agent.audit.affinity import AUDITED_POOLS, AffinityAudit, AffinityFinding, StrayThread, stray_threads
from agent.audit.interference import INTERFERENCE_MODES, InterferenceCollector
from agent.audit.probe import CPUTimes, NodeProbe, PsutilProbe

__all__ = [
    "AUDITED_POOLS",
    "INTERFERENCE_MODES",
    "AffinityAudit",
    "AffinityFinding",
    "CPUTimes",
    "InterferenceCollector",
    "NodeProbe",
    "PsutilProbe",
    "StrayThread",
    "stray_threads",
]
