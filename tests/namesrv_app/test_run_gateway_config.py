"""run_gateway --config: upstream's -c properties file, refused clearly when wrong."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.management.base import CommandError

from namesrv_app.management.commands.run_gateway import namesrv_properties


def test_no_file_means_no_properties() -> None:
    assert namesrv_properties(None) == {}


def test_it_reads_java_properties_by_their_java_names(tmp_path: Path) -> None:
    path = tmp_path / "namesrv.properties"
    path.write_text("! comment\norderMessageEnable = true\nunknownKey=ignored-by-the-config\n")
    assert namesrv_properties(path) == {
        "orderMessageEnable": "true",
        "unknownKey": "ignored-by-the-config",
    }


def test_a_value_of_the_wrong_type_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "namesrv.properties"
    path.write_text("scanNotActiveBrokerInterval=soon\n")
    with pytest.raises(CommandError, match="scanNotActiveBrokerInterval"):
        namesrv_properties(path)


def test_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="--config"):
        namesrv_properties(tmp_path / "nope.properties")
