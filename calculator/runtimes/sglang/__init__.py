"""SGLang as a runtime: start-up memory plan, attention-backend compatibility, launch command.

Pure functions and pydantic models (no Django, no torch). Covered releases: :data:`releases.COVERED`.
"""
from .compare import explain_vs_vllm
from .compat import BackendChoice, BackendVerdict, backends_table, check_backend, default_backend
from .launch import launch_argv
from .memory import SGLangPlan, plan
from .releases import COVERED

__all__ = [
           "COVERED",
           "BackendChoice",
           "BackendVerdict",
           "SGLangPlan",
           "backends_table",
           "check_backend",
           "default_backend",
           "explain_vs_vllm",
           "launch_argv",
           "plan",
]
