"""Search layer: search tasks, sketch rules, annotation sampling and evolutionary search.

Imports only ``cost_model`` and ``schedule`` (their top-level packages).
"""
