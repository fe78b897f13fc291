"""What importing NRI support costs the commands that do not connect: no protobuf."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.paths import REPO

PROBE = """
import json, sys
import agent.commands.plan, agent.commands.topology, agent.config, agent.runner
import agent.nri
from agent.nri import NRIConfig, NRIHandler, ContainerAdjustment, CallOutcome, nri_config_from_mapping
before = "google.protobuf" in sys.modules
from agent.nri.plugin import NRIPlugin
print(json.dumps({"before": before, "after": "google.protobuf" in sys.modules}))
"""


def test_protobuf_loads_only_with_the_plugin() -> None:
    """plan, topology, the configuration, the runner and the NRI package load no protobuf; the plugin does."""
    result = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, cwd=REPO)
    assert {"before": False, "after": True} == json.loads(result.stdout)
