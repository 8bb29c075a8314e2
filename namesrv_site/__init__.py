"""The Django project of the Raft-replicated RocketMQ NameServer."""
