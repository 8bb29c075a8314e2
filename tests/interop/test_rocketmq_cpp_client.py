"""rocketmq 0.4.4 (rocketmq-client-cpp 1.0.1, version 63) fetches a topic's queues.

The C++ client runs in its own venv (``.cache/interop/py``) through
``rocketmq_cpp_driver.py``. Its C API returns 0 queues for any failure, so the
test asks for a registered topic and checks every queue it built.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.interop.conftest import RunningNamesrv
from tools.interop_setup import InteropClients

pytestmark = [pytest.mark.interop, pytest.mark.slow]

DRIVER = Path(__file__).with_name("rocketmq_cpp_driver.py")
DRIVER_TIMEOUT_S = 60
READ_QUEUE_NUMS = 4


def test_its_consumer_fetches_every_read_queue_of_a_registered_topic(
    interop_clients: InteropClients, namesrv: RunningNamesrv, tmp_path: Path
) -> None:
    done = subprocess.run(
        [str(interop_clients.python_executable), str(DRIVER), namesrv.addr, namesrv.topic],
        # The C++ client logs under $HOME/logs/rocketmq-cpp: keep that in the test's folder.
        env={**os.environ, "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=DRIVER_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, f"rocketmq driver failed:\n{done.stdout}\n{done.stderr}"
    seen = json.loads(done.stdout.strip().splitlines()[-1])

    assert seen["status"] == 0
    assert sorted((q["brokerName"], q["queueId"]) for q in seen["queues"]) == [
        ("broker-a", queue_id) for queue_id in range(READ_QUEUE_NUMS)
    ]
    assert {q["topic"] for q in seen["queues"]} == {namesrv.topic}
