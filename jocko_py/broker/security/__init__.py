"""Kafka's security model: TLS listeners (`tls`), SASL authentication (`sasl`,
`scram`), the per-connection session with its principal (`session`) and ACL
authorization (`authorizer`)."""
