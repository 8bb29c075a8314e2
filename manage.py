#!/usr/bin/env python
"""Django's command-line entry point for the NameServer project."""

from __future__ import annotations

import os
import sys


def main() -> None:
    """Run a Django management command with the project's settings."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "namesrv_site.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
