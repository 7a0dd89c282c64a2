"""In-process tests of the library's parts, mostly without HTTP: the protocol model and codec,
the state machine, the runtime, settings, the package layout, push signing and the
SSRF guard."""
