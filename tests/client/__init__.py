"""The blocking client, the command line, and the client against the official a2a-sdk."""
