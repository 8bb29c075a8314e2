"""Suite-wide setup shared by every test group."""

from __future__ import annotations

import os

from raftstore.raft import VERIFY_OWN_ENTRIES_ENV

# Every Raft node the suite starts, in this process or in a gateway subprocess
# (which inherits the environment), decodes the entries it proposed as well and
# raises an alarm if they differ from the commands it applied instead: the tests
# that assert "no alarms" then also prove the commands built anywhere round-trip
# exactly through the log codec.
os.environ.setdefault(VERIFY_OWN_ENTRIES_ENV, "1")
