"""Installs the broken NameServer of ``tests.experiments.broken_namesrv`` in a gateway
process launched with its environment (``launch_env``); does nothing anywhere else.

This folder is on PYTHONPATH only for clusters a test launches broken on purpose."""

import os
import sys
from pathlib import Path

if "run_gateway" in getattr(sys, "orig_argv", sys.argv):
    # The repository root (site/ broken_namesrv/ experiments/ tests/ root): ``tests`` is
    # not on the path yet while Python starts.
    sys.path.append(str(Path(__file__).resolve().parents[4]))
    from tests.experiments.broken_namesrv import install

    install(sys.orig_argv, os.environ)
