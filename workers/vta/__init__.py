"""The ``vta`` accelerator as a device: a cycle-approximate, bit-exact simulator of its
instruction stream (``Simulator``), labelled simulated wherever its figures are reported.
The instruction set and configuration are ``schedule.vta``'s."""

from .execute import SimulationError, VtaState
from .simulator import SimResult, Simulator

__all__ = ["SimResult", "SimulationError", "Simulator", "VtaState"]
