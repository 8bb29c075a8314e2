"""``manage.py create_operator``: a console user in the operator (or viewer) role.

There are no default credentials. The password comes from ``--password-env``
(the name of an environment variable) or an interactive prompt, never from the
command line where other users could read it in the process list.

Scripts never need a terminal: with ``--password-env`` nothing is asked, and
``--token`` alone makes an API-only account (a new user gets no usable password)
and prints the token, bare, as the last line of the output. Without either and
without a terminal, the command says so instead of failing inside ``getpass``.

Accounts live in the cluster's shared database, so one made here works on every
node; ``--run-dir run/local`` writes to a local cluster's (see
:mod:`namesrv_app.management.run_dir`).
"""

from __future__ import annotations

import getpass
import os
import sys
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from rest_framework.authtoken.models import Token

from namesrv_app.management.run_dir import add_run_dir_argument, apply_run_dir
from namesrv_app.roles import OPERATOR_GROUP, ROLE_GROUPS


class Command(BaseCommand):
    """Create or update a user and put it in one console role."""

    help = "Create a console user with the operator (default) or viewer role."

    def add_arguments(self, parser: CommandParser) -> None:
        """username, role, where the password comes from, and whether to print a token."""
        parser.add_argument("username")
        parser.add_argument("--role", choices=ROLE_GROUPS, default=OPERATOR_GROUP)
        parser.add_argument(
            "--password-env", default="", help="read the password from this env var"
        )
        parser.add_argument(
            "--token",
            action="store_true",
            help="print an API token for the user as the last line (alone: an API-only "
            "account, no password asked)",
        )
        add_run_dir_argument(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        """Create (or update) the user, set the password, set the role."""
        apply_run_dir(options["run_dir"])
        api_only = options["token"] and not options["password_env"]
        password = None if api_only else self._password(options["password_env"])
        user_model = get_user_model()
        user, created = user_model.objects.get_or_create(username=options["username"])
        if password is not None:
            try:
                validate_password(password, user)
            except ValidationError as exc:
                raise CommandError("; ".join(exc.messages)) from exc
            user.set_password(password)
        elif created:
            # API-only: no password anyone could guess; an existing user keeps theirs.
            user.set_unusable_password()
        user.save()
        groups = Group.objects.filter(name__in=ROLE_GROUPS)
        user.groups.remove(*groups)
        user.groups.add(Group.objects.get_or_create(name=options["role"])[0])
        verb = "created" if created else "updated"
        self.stdout.write(f"{verb} {user.username} with role {options['role']}")
        if options["token"]:
            token, _ = Token.objects.get_or_create(user=user)
            # Last and alone on its line: TOKEN=$(manage.py create_operator ... | tail -1).
            self.stdout.write(token.key)

    def _password(self, env_name: str) -> str:
        if env_name:
            password = os.environ.get(env_name, "")
            if not password:
                raise CommandError(f"environment variable {env_name} is empty or unset")
            return password
        if not sys.stdin.isatty():
            raise CommandError(
                "no terminal to ask for a password: give --password-env NAME "
                "(or --token for an API-only account)"
            )
        first = getpass.getpass("Password: ")
        if first != getpass.getpass("Password (again): "):
            raise CommandError("the passwords differ")
        return first
