"""The ``vta`` accelerator as a device: a cycle-approximate, bit-exact simulator of its
instruction stream (``Simulator``), labelled simulated wherever its figures are reported,
and the device plugin that builds candidates for it and runs them there (``VtaDevice``).
The instruction set and configuration are ``schedule.vta``'s."""

from .device import VtaDevice, simulated_facts
from .execute import SimulationError, VtaState
from .simulator import SimResult, Simulator

__all__ = ["SimResult", "SimulationError", "Simulator", "VtaDevice", "VtaState",
           "simulated_facts"]
