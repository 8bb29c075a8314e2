"""Classic master/slave HA replication (RocketMQ HAService / HAClient)."""
