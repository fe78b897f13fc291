"""What importing NRI support costs the commands that do not connect: no protobuf."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

PROBE = """
import json, sys
import agent.commands.plan, agent.commands.topology, agent.runner
import agent.nri
from agent.nri import NRIConfig, NRIHandler, ContainerAdjustment, CallOutcome, nri_config_from_mapping
before = "google.protobuf" in sys.modules
from agent.nri import NRIPlugin
print(json.dumps({"before": before, "after": "google.protobuf" in sys.modules}))
"""


def test_protobuf_loads_only_with_the_plugin() -> None:
    """plan, topology, the runner and the NRI values load no protobuf; the plugin itself does."""
    result = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, cwd=REPO)
    assert {"before": False, "after": True} == json.loads(result.stdout)
