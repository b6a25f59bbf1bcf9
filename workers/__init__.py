"""Workers layer: builders and runners, device plugins (cpu, cuda, vta), the Ray pool,
and the remote device server/client.

Imports only ``schedule`` (its top-level package).
"""
