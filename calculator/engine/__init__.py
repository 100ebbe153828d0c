"""The memory engine: plain functions and pydantic models, no Django. Entry point: :func:`estimate`."""
from .errors import EngineInputError
from .memory import estimate
from .schemas import CheckpointWeights, EngineInput, EstimateResult, SpeculativeConfig

__all__ = ["estimate", "EngineInput", "EstimateResult", "SpeculativeConfig", "CheckpointWeights", "EngineInputError"]
