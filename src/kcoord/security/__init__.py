"""Who a connection is (principals), how it proves it (TLS, SASL) and what it may do (ACLs)."""
