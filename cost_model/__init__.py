"""Cost-model layer: program features, the XGBoost cost model and baselines.

Imports only ``schedule`` (its top-level package).
"""
