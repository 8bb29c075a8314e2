"""The Nodes page's backup button in a real browser: an operator downloads the node's
backup, the file checks, and the audit log says who took it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from raftstore.backup import read_backup_file
from tests.browser.conftest import ConsoleNode, screenshot

pytestmark = pytest.mark.slow
DOWNLOAD_TIMEOUT_MS = 30_000


def test_the_backup_button_downloads_the_nodes_backup_and_is_audited(
    page: Any, console_node: ConsoleNode, tmp_path: Path
) -> None:
    page.goto(f"{console_node.url}/nodes/")
    assert "Backup" in page.inner_text("#backup")
    page.locator("#backup").scroll_into_view_if_needed()
    screenshot(page, "nodes-backup.png")

    with page.expect_download(timeout=DOWNLOAD_TIMEOUT_MS) as started:
        page.click("#backup-download")
    download = started.value
    target = tmp_path / download.suggested_filename
    download.save_as(str(target))

    assert re.fullmatch(r"namesrv-namesrv-\d+-\d{8}T\d{6}Z\.nsbackup", target.name)
    read = read_backup_file(target)
    assert (read.header.mode, read.header.node) == ("eventual", "n1")
    assert read.table.pickup_topic_route("TopicTest") is not None
    page.goto(f"{console_node.url}/audit/")
    first = page.locator("table.grid tbody tr").first.inner_text()
    assert "backup" in first and "ok" in first
