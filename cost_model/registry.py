"""Cost models by name: ``make_cost_model("xgb")``, ``load_cost_model(snapshot_bytes)``.

Built in: ``xgb`` (the default of the search), ``sklearn``, ``analytic`` and ``random``. A
user registers another with ``register_cost_model(name, factory)``; the factory takes the
keyword arguments given to ``make_cost_model`` and returns a ``CostModel``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import snapshot
from .base import CostModel
from .simple_models import AnalyticModel, RandomModel
from .sklearn_model import SklearnModel
from .xgb_model import XGBModel

CostModelFactory = Callable[..., CostModel]

_REGISTRY: dict[str, CostModelFactory] = {
    "xgb": XGBModel,
    "sklearn": SklearnModel,
    "analytic": AnalyticModel,
    "random": RandomModel,
}


def register_cost_model(name: str, factory: CostModelFactory, replace: bool = False) -> None:
    """Make ``factory`` available as ``make_cost_model(name)``."""
    if not name or not isinstance(name, str):
        raise ValueError("a cost model needs a non-empty name")
    if name in _REGISTRY and not replace:
        raise ValueError(f"a cost model named {name!r} is already registered "
                         "(pass replace=True to replace it)")
    _REGISTRY[name] = factory


def available_cost_models() -> list[str]:
    return sorted(_REGISTRY)


def make_cost_model(name: str = "xgb", **kwargs: Any) -> CostModel:
    """A new, untrained cost model of the given name."""
    try:
        factory = _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown cost model {name!r}; known: "
                         f"{', '.join(available_cost_models())}") from None
    return factory(**kwargs)


def load_cost_model(data: bytes) -> CostModel:
    """A cost model restored from a ``save()`` snapshot, of the kind the snapshot names."""
    kind, _, _ = snapshot.unpack(data)
    model = make_cost_model(kind)
    model.load(data)
    return model
