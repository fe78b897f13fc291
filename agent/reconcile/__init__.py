"""The reconciler: pods in, planner decisions, cgroup values out, one pass at a time.

:class:`Reconciler` (:mod:`.reconciler`) runs a pass: it reads the pods the
sources reported (:class:`PodCache`, :mod:`.pods`), has its deciding half
(:class:`Decider`, :mod:`.decider`, pure: values in, decisions and outcomes out)
ask the planner, reports what it returned, and has its applying
half (:class:`Applier`, :mod:`.applier`) turn the plan into cgroup targets
(:mod:`.targets`) and write them, a full pass as a :class:`Sweep` of steps
(:mod:`.sweep`); :class:`Reporter`
(:mod:`.reporter`) turns decisions and write results into log lines, metrics and
Events. Who each container cgroup is comes from one :class:`IdentityBook`
(:mod:`.identity`), fed by the pod statuses, the runtime's bundles
(:class:`BundleNamer`, :mod:`.naming`) and NRI. It never decides who gets which
CPU: the planner does. Importing it loads the Kubernetes client through
:mod:`agent.kube`, so only ``podpin run`` imports it.
"""

from agent.reconcile.applier import Applier
from agent.reconcile.decider import Decided, Decider
from agent.reconcile.identity import PRECEDENCE, Identity, IdentityBook, StatusFeed
from agent.reconcile.naming import BundleNamer
from agent.reconcile.pods import BadContainerID, Malformed, PodCache
from agent.reconcile.reconciler import Pending, Reconciler
from agent.reconcile.reporter import EventSink, Reporter
from agent.reconcile.snapshot import Snapshot
from agent.reconcile.sweep import QoSLevels, Sweep, SweepStep
from agent.reconcile.targets import Target, pod_targets, qos_targets

__all__ = [
    "PRECEDENCE",
    "Applier",
    "BadContainerID",
    "BundleNamer",
    "Decided",
    "Decider",
    "EventSink",
    "Identity",
    "IdentityBook",
    "Malformed",
    "Pending",
    "PodCache",
    "QoSLevels",
    "Reconciler",
    "Reporter",
    "Snapshot",
    "StatusFeed",
    "Sweep",
    "SweepStep",
    "Target",
    "pod_targets",
    "qos_targets",
]
