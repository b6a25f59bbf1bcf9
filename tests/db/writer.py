"""A writer process for the concurrency tests (run as ``python -m tests.db.writer``).

``concurrent URL START STOP BATCH GO_FILE``: print READY, wait until GO_FILE exists, then
add records START..STOP-1 (tests.db.helpers.batch) in batches of BATCH; print the number
added as JSON.

``hang URL COUNT WHEN``: add COUNT records in one batch. WHEN=mid: after the first INSERT
of records reaches the database (inside the transaction), print MID and sleep; WHEN=after:
print COMMITTED after the batch committed, and sleep. The test kills it with SIGKILL.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from sqlalchemy import event

from db import Database
from tests.db.helpers import batch


def concurrent(url: str, start: int, stop: int, size: int, go_file: str) -> None:
    database = Database(url)
    print("READY", flush=True)
    deadline = time.monotonic() + 60
    while not os.path.exists(go_file):
        if time.monotonic() > deadline:
            raise SystemExit("no go signal")
        time.sleep(0.005)
    added = 0
    for first in range(start, stop, size):
        added += database.add_records(batch(first, min(first + size, stop)))
    print(json.dumps({"added": added}), flush=True)


def hang(url: str, count: int, when: str) -> None:
    database = Database(url)
    records = batch(10_000, 10_000 + count)
    if when == "mid":

        def after_execute(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
            if statement.lstrip().upper().startswith("INSERT INTO RECORDS"):
                print("MID", flush=True)
                time.sleep(120)

        event.listen(database.connector.engine, "after_cursor_execute", after_execute)
        database.add_records(records)
        raise SystemExit("the batch was not interrupted")
    database.add_records(records)
    print("COMMITTED", flush=True)
    time.sleep(120)


if __name__ == "__main__":
    mode, url, *rest = sys.argv[1:]
    if mode == "concurrent":
        concurrent(url, int(rest[0]), int(rest[1]), int(rest[2]), rest[3])
    else:
        hang(url, int(rest[0]), rest[1])
