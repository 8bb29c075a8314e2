"""``manage.py`` commands: run_gateway."""
