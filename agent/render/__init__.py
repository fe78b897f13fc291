"""Renderings of plans for people (text, with a CPU map) and machines (JSON)."""

from agent.render.plan_json import plan_to_dict, pod_to_dict
from agent.render.plan_text import owner_tags, render_plan_text

__all__ = ["owner_tags", "plan_to_dict", "pod_to_dict", "render_plan_text"]
