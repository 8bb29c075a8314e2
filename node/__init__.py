"""One NameServer node on one host: its config file (:mod:`node.config`), the processes
it runs (:mod:`node.processes`) and the supervisor that keeps them together
(:mod:`node.supervise`, ``manage.py run_node``). ``cluster up`` starts its local
nodes through the same modules. Django-free: import-linter checks it."""
