"""`demo`: the whole product on this machine in under a minute."""
