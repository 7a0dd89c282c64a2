"""Property-based fuzzing (hypothesis, fixed seed) of the JSON-RPC and REST bindings."""
