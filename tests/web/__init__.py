"""The agent through its Flask app in-process (the test client or A2ATestClient): JSON-RPC,
REST, the dialects, every method, auth, cards, limits, push configs, the inspector, the
flask commands, observability."""
