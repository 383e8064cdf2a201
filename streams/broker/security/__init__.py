"""Authentication and authorization: SCRAM (`scram`, `credentials`), TLS listeners
(`tls`), and the ACL authorizer.

Imports nothing of the broker but its config, context and protocol layers; the coordinator
wires the stores to the broker's metadata log, the server builds its listeners' TLS.
"""
