"""``manage.py create_operator``: a console user in the operator (or viewer) role.

There are no default credentials. The password comes from ``--password-env``
(the name of an environment variable) or an interactive prompt, never from the
command line where other users could read it in the process list.

The password must pass Django's validators (``AUTH_PASSWORD_VALIDATORS``: length,
common passwords, digits only, likeness to the username); a weak one is refused
with their messages and nothing is created or changed.

Scripts never need a terminal: with ``--password-env`` nothing is asked, and
``--token`` alone makes an API-only account (a new user gets no usable password)
and prints the token, bare, as the last line of the output. Without either and
without a terminal, the command says so instead of failing inside ``getpass``.

The token is shown this once: the database keeps only its hash
(:mod:`namesrv_app.tokens`). It expires after ``--token-days`` (default
``NAMESRV_WEB['TOKEN_DAYS']``, 90); running ``--token`` again replaces the user's
token, and the old one stops working.

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
from django.core.management.base import CommandError, CommandParser
from django.db import transaction

from broker_app.management.command import ProjectCommand
from namesrv_app.management.run_dir import (
    add_run_dir_argument,
    apply_run_dir,
    chosen_run_dir,
    require_shared_tables,
)
from namesrv_app.models import ApiToken
from namesrv_app.roles import OPERATOR_GROUP, ROLE_GROUPS
from namesrv_app.tokens import (
    TOKEN_DAYS_MAX,
    check_token_days,
    default_token_days,
    issue_token,
)


class Command(ProjectCommand):
    """Create or update a user and put it in one console role."""

    help = "Create a console user with the operator (default) or viewer role."

    def add_arguments(self, parser: CommandParser) -> None:
        """username, role, where the password comes from, and whether to print a token."""
        parser.add_argument("username", help="the account's name (created, or updated)")
        parser.add_argument(
            "--role",
            choices=ROLE_GROUPS,
            default=OPERATOR_GROUP,
            help="viewer reads; operator also writes",
        )
        parser.add_argument(
            "--password-env", default="", help="read the password from this env var"
        )
        parser.add_argument(
            "--token",
            action="store_true",
            help="print a new API token for the user as the last line, replacing any "
            "earlier one (alone: an API-only account, no password asked)",
        )
        parser.add_argument(
            "--token-days",
            type=int,
            default=None,
            metavar="DAYS",
            help=f"how long the token lives, 1 to {TOKEN_DAYS_MAX} days (default: "
            "NAMESRV_WEB_TOKEN_DAYS, 90)",
        )
        add_run_dir_argument(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        """Create (or update) the user, set the password, set the role, issue a token."""
        apply_run_dir(chosen_run_dir(options["run_dir"], self.stdout.write, "the account"))
        require_shared_tables(get_user_model()._meta.db_table)
        token_days = self._token_days(options["token"], options["token_days"])
        api_only = options["token"] and not options["password_env"]
        password = None if api_only else self._password(options["password_env"])
        with transaction.atomic():
            user, created = self._user(options["username"], password)
            groups = Group.objects.filter(name__in=ROLE_GROUPS)
            user.groups.remove(*groups)
            user.groups.add(Group.objects.get_or_create(name=options["role"])[0])
            replaced = options["token"] and ApiToken.objects.filter(user=user).exists()
            issued = issue_token(user, token_days) if options["token"] else None
        verb = "created" if created else "updated"
        self.stdout.write(f"{verb} {user.username} with role {options['role']}")
        if issued is not None:
            key, token = issued
            if replaced:
                self.stdout.write(f"the previous API token of {user.username} no longer works")
            self.stdout.write(
                f"API token of {user.username}, valid until {token.expires:%Y-%m-%d %H:%M} UTC; "
                "shown only now (the database keeps its hash):"
            )
            # Last and alone on its line: TOKEN=$(manage.py create_operator ... | tail -1).
            self.stdout.write(key)

    def _user(self, username: str, password: str | None) -> tuple[Any, bool]:
        """The user, saved with ``password`` once it passed the validators; created
        when missing. A refused password leaves no account behind."""
        user_model = get_user_model()
        existing = user_model.objects.filter(username=username).first()
        created = existing is None
        user = user_model(username=username) if existing is None else existing
        if password is not None:
            try:
                validate_password(password, user)
            except ValidationError as exc:
                raise CommandError("password refused: " + " ".join(exc.messages)) from None
            user.set_password(password)
        elif created:
            # API-only: no password anyone could guess; an existing user keeps theirs.
            user.set_unusable_password()
        user.save()
        return user, created

    def _token_days(self, token: bool, days: int | None) -> int | None:
        """The token's lifetime in days (None without ``--token``), checked up front."""
        if not token:
            if days is not None:
                raise CommandError("--token-days needs --token")
            return None
        source = "--token-days" if days is not None else "NAMESRV_WEB_TOKEN_DAYS"
        lifetime = days if days is not None else default_token_days()
        try:
            check_token_days(lifetime)
        except ValueError as exc:
            raise CommandError(f"{source}: {exc}") from None
        return lifetime

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
